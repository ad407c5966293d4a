"""The length-control methods, one module each; `registry.METHODS` names them."""
