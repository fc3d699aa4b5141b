"""The stage the matrix, the Kubernetes images and the Molecule hosts stand on.

`image`: the prepared image of a family, keyed by a small spec (family,
Debian suite or registry image, architecture, kernel headers package).
`packages`: the packages of a commit, built through the package pipeline's
one door (so checked against packages/gdrcopy.yaml and linted), and picked
by package name.  gdrkit.matrix, gdrkit.kube and gdrkit.fleet sit side by
side above this floor and import none of each other.
"""
