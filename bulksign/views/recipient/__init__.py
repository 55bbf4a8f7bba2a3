"""What recipients and the public reach without an account: the signing page, the open-tracking pixel, ``/verify``."""
