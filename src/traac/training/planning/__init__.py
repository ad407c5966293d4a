"""Recipe and memory planning, before a model loads: TRAACConfig and its checks."""
