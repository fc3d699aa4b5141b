"""Fleet rollout: the Ansible role in ansible/ and the runs that test it.

`gdrkit.fleet.ansible`   Ansible and Molecule from the toolkit's environment,
                         and the collections Molecule's docker driver needs
`gdrkit.fleet.molecule`  `./toolkit molecule`: hosts of several Debian
                         releases converge from a published, signed repository
`gdrkit.fleet.vmload`    the role applied inside a booted kernel with softgpu:
                         gdrdrv loaded, /dev/gdrdrv as configured, doctor passing
"""
