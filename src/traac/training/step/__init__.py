"""The TRAAC step outside TRL: its phases, their driver and host, rounds, compression."""
