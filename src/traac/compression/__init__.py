"""The method itself, independent of TRL: segmentation, step scoring, compression, difficulty
bins, rewards, metrics, and the peer methods' length rewards."""
