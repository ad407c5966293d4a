"""The TRL adapter: TRAACTrainer over TRL's GRPOTrainer and what it plugs in."""
