"""Measured speed tricks, each behind the interface of the plain code it replaces.

Every module here states what it replaces, why (its measurement), and is tested against the
plain version on inputs that provably take its path. ``profiles.PROFILES`` holds the two
ways to build and run a model: the paper's code alone, and the fast one (the default).
"""

from aiayn.accel.profiles import (
    DEFAULT_PROFILE,
    FAST,
    PROFILES,
    REFERENCE,
    Profile,
    ProfileError,
    get_profile,
)

__all__ = [
    "DEFAULT_PROFILE",
    "FAST",
    "PROFILES",
    "REFERENCE",
    "Profile",
    "ProfileError",
    "get_profile",
]
