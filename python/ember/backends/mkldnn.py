"""ember.backends.mkldnn: PyTorch's oneDNN switch; ember does not use oneDNN."""

enabled = True


def is_available():
    return False
