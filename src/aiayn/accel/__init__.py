"""Measured speed tricks, each behind the interface of the plain code it replaces.

Every module here states what it replaces, why (its measurement), and is tested against the
plain version on inputs that provably take its path. ``profiles.PROFILES`` names the two
ways to build a model: ``reference`` (the paper's code alone) and ``fast`` (the default).
"""

from aiayn.accel.profiles import DEFAULT_PROFILE, PROFILES, Profile, ProfileName, get_profile

__all__ = ["DEFAULT_PROFILE", "PROFILES", "Profile", "ProfileName", "get_profile"]
