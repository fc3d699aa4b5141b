"""The tree's host actions (`./toolkit insmod`, `rmmod`, `sanity`): gdrdrv loaded with its parameters.

The doctor that also ships to nodes is gdrkit.gdrcopy_doctor, at the bottom floor.
"""
