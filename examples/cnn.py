"""A ResNet-style CNN with bottleneck blocks, trained for image classification on random images.

The model (torchvision's names): the stem `conv1` (7x7, stride 2), `bn1`, `relu`, `maxpool`; four stages `layer1`
.. `layer4` of `Bottleneck` blocks (`conv1` 1x1, `bn1`, `conv2` 3x3 (the stride), `bn2`, `conv3` 1x1 to 4x the
width, `bn3`, `relu` after each and after the residual add; `downsample`, a 1x1 conv + BN, where the shape
changes); `avgpool`, `fc`. --depth is 3 x blocks + 2: 50, 101 and 152 have ResNet's layouts ([3, 4, 6, 3],
[3, 4, 23, 3], [3, 8, 36, 3]); a smaller depth spreads its blocks over the stages (14: one each). SGD with
momentum by default; --checkpoint checkpoints every bottleneck block.

    python examples/cnn.py                                  # tiny: depth 20 ([1, 2, 2, 1] blocks), 32x32 images
    python examples/cnn.py --depth 50 --width 64 --image 224 --batch 128 --classes 1000 --log   # ResNet-50

With daydream: `daydream record --steps 3 -- python examples/cnn.py --depth 50 --width 64 --image 224 --batch 64`,
then `daydream run TRACE transforms/bn_restructure.whatif` (BN + ReLU fused) or `transforms/amp.whatif`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Integers, Normal, checkpointed, make_parser, parse_args, train  # noqa: E402

LAYOUTS = {50: [3, 4, 6, 3], 101: [3, 4, 23, 3], 152: [3, 8, 36, 3], 200: [3, 24, 36, 3]}


def layout(depth: int) -> list[int]:
    """Bottleneck blocks per stage for a depth of 3 x blocks + 2 (ResNet's own layouts for 50, 101, 152, 200)."""
    if depth in LAYOUTS:
        return LAYOUTS[depth]
    blocks, extra = divmod((depth - 2) // 3, 4)
    stages = [blocks] * 4
    for i in (2, 1, 3)[:extra]:  # as ResNet does, the third stage grows first
        stages[i] += 1
    return stages


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, channels: int, width: int, stride: int = 1) -> None:
        super().__init__()
        out = width * self.expansion
        self.conv1 = nn.Conv2d(channels, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out)
        self.relu = nn.ReLU(inplace=True)
        self.downsample: nn.Module | None = None
        if stride != 1 or channels != out:
            self.downsample = nn.Sequential(nn.Conv2d(channels, out, 1, stride=stride, bias=False), nn.BatchNorm2d(out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return self.relu(y + identity)


class ResNet(nn.Module):
    def __init__(self, stages: list[int], width: int = 64, classes: int = 1000, checkpoint: bool = False) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        channels = width
        for i, blocks in enumerate(stages):
            stage_width = width * 2**i
            layers = []
            for b in range(blocks):
                layers.append(Bottleneck(channels, stage_width, stride=2 if b == 0 and i > 0 else 1))
                channels = stage_width * Bottleneck.expansion
            setattr(self, f"layer{i + 1}", nn.Sequential(*layers))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(channels, classes)
        self.stages = len(stages)
        self.checkpoint = checkpoint

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        for i in range(self.stages):
            stage = getattr(self, f"layer{i + 1}")
            if self.checkpoint:
                for block in stage:
                    x = checkpointed(block, x)
            else:
                x = stage(x)
        return self.fc(torch.flatten(self.avgpool(x), 1))


def main() -> None:
    parser = make_parser(__doc__, batch=16, optimizer="sgd")
    group = parser.add_argument_group("model")
    group.add_argument(
        "--depth",
        type=int,
        default=20,
        help="layers, 3 x bottleneck blocks + 2: 14, 26, 50, 101, 152 ... (default: %(default)s)",
    )
    group.add_argument(
        "--width",
        type=int,
        default=16,
        help=(
            "channels of the stem and of the first stage's blocks, doubled at each stage; 64 is ResNet's (default:"
            " %(default)s)"
        ),
    )
    group.add_argument("--image", type=int, default=32, help="image height and width (default: %(default)s)")
    group.add_argument("--classes", type=int, default=10, help="classes (default: %(default)s)")
    group.add_argument("--channels-last", action="store_true", help="NHWC memory format for the model and the images")
    args = parse_args(parser)
    if args.depth < 14 or (args.depth - 2) % 3:
        parser.error(
            "--depth must be 3 x blocks + 2 with at least one block per stage: 14, 17, 20, ... 26, 50, 101, 152"
        )
    if args.width < 1 or args.image < 8 or args.classes < 1:
        parser.error("--width and --classes must be at least 1, --image at least 8")

    torch.manual_seed(args.seed)
    torch.backends.cudnn.benchmark = True
    with args.device:
        model = ResNet(layout(args.depth), args.width, args.classes, checkpoint=args.checkpoint)
    place = None
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)

        def place(batch: tuple) -> tuple:
            (images,), labels = batch
            images = images.to(args.device, non_blocking=True).contiguous(memory_format=torch.channels_last)
            return (images,), labels.to(args.device, non_blocking=True)

    train(
        args, model, [Normal((3, args.image, args.image))], Integers(args.classes), nn.CrossEntropyLoss(), place=place
    )


if __name__ == "__main__":
    main()
