"""The container images, built reproducibly and found by the digest of their recipe.

base         the offline base (debootstrap + import), pinned by id, and what the builder reads of it
recipes      every input of an image, the recipe digest, the tag and the labels
definitions  each image's layers and runtime config, prepared on the host (the Dockerfiles' place)
layers       deterministic layer tars
archive      deterministic image configs and docker-archive tarballs
compile      bytecode compiled by the image's own python3, in a build container
wheels       pip locks, hash-checked downloads, wheels unpacked without pip's installer
npm          npm locks and ``npm ci --ignore-scripts``
lock         ``agent-eval images lock``: regenerating a runner's lock on purpose
build        building (or reusing) a checkout's images; finding them again
provenance   ``agent-eval images verify``: rebuilding an image's recipe and comparing ids
"""
