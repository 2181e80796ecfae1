"""Where the oracle's rows come from (the generator, labelled files, WildChat, a held-out file) and how each stage's rows are shaped from them."""
