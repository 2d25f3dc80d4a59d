"""Framework adapters over the same recorder: import the one you need
(trainprof.integrations.lightning, .transformers, .keras); each imports its framework lazily."""
