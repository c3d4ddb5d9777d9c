"""The disposable consumer project: the library installed, its guides, and its API catalog.

    archives  the batch's consumer, installed offline from the candidate wheels in a container
    cache     prepared consumers kept across batches by their inputs' digest, checked at each use
    source    a consumer made from the library's source tree (``tasks verify``, tests)
    setup     the installer that runs inside the verifier image; standard library only
    catalog   the API catalog generator (``python -m agent_eval.consumer.catalog``); standard
              library only

This face imports nothing: ``setup`` and ``catalog`` run inside the verifier
image with the standard library alone.
"""
