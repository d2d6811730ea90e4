"""Kernels: what one GPU or CPU kernel costs from its op, shapes and dtype, here or on another device.

From the op's shapes (``costs``: FLOPs and bytes), a device's datasheet (``devices``: kernels/devices.toml; the bound
itself in ``roofline_bound``), the trace's own kernels (``roofline``: efficiencies calibrated on them), measured
kernels of many GPUs (``device_model`` fitted on ``kernel_data``, the NeuSight data set) and this machine's
microbenchmarks (``microbench`` measures, ``mlp`` fits).
"""
