"""Signed package repositories from dist/: `./toolkit publish`.

versions.py compares package versions as dpkg and rpm do; model.py reads the
package files and the repository's record of what it holds, and plans (pure)
what to add, what is already there and what is refused; manifest.py turns
matrix results (JUnit) into the compatibility manifest and the index page;
repo.py carries a plan out with gpg, reprepro, rpmsign and createrepo_c.
"""
