"""Embedding tables: a batched embedding-bag lookup's time, the hot rows under a GPU memory budget, FAE's epoch
and the sharding of tables over ranks.

From the tables' rows, dims and pooling (the heuristic of Lin et al., ``embedding_bag``), the inputs' access counts
(``hot_rows``: FAE's estimator), the device catalog and PCIe links (``fae``) and the collective model (``sharding``'s
all-to-alls).
"""
