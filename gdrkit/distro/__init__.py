"""The distribution registry: every fact that differs between distributions.

`families` holds one class per family (debian, rhel, suse): paths, package
manager verbs, build and image packages, kernel headers, install hints.
`debian` holds the one set of Debian suites and mirrors, and the Debian and
Ubuntu releases packages are built for.
"""
