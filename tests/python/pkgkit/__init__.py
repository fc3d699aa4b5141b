"""The packaging test kit: a fixture source tree, the reference GDRCopy's packages
rebuilt, and the install, upgrade and fault scenarios run in containers and VMs.

Test code, kept out of gdrkit so that the product package never reaches for
Docker or a VM to test itself.
"""
