"""ember.backends.mps: Apple's Metal backend, which ember does not have."""


def is_available():
    return False


def is_built():
    return False
