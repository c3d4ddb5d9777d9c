"""Names bound twice, by a fallback import or a version check: mypy keeps the first binding.

mypy reads ``try`` then its handlers, ``else`` and ``finally``, and of an ``if`` only
the branch a condition it decides (``TYPE_CHECKING``, ``sys.version_info``) takes. A
name whose first binding is an implicit import is not exported, whatever a later
assignment or ``def`` binds at run time.
"""

import sys
from typing import TYPE_CHECKING

# Imported first (and the import succeeds): the fallback value is not what mypy exports.
try:
    from ssl import OP_NO_TICKET
except ImportError:
    OP_NO_TICKET = 0x4000  # type: ignore[assignment,misc]

# Imported first, explicitly re-exported: exported.
try:
    from ssl import OP_NO_COMPRESSION as OP_NO_COMPRESSION
except ImportError:
    OP_NO_COMPRESSION = 0x20000  # type: ignore[assignment,misc]

# The import fails at run time, so the fallback runs; mypy still sees the import first.
try:
    from starkit_missing_dependency import accelerated  # type: ignore[import-not-found]
except ImportError:
    accelerated = None

try:
    from starkit_missing_dependency import checksum  # type: ignore[import-not-found]
except ImportError:

    def checksum(data: bytes) -> int:
        return sum(data)


# The handler assigns before ``else`` imports: the assignment is the first binding.
try:
    from starkit_missing_dependency import backend  # type: ignore[import-not-found]
except ImportError:
    backend = None
    backend_version = None
else:
    from starkit_missing_dependency import (  # type: ignore[import-not-found,no-redef]
        backend_version,  # noqa: F401
    )

# mypy reads only the ``TYPE_CHECKING`` branch; the run time only the other.
if TYPE_CHECKING:
    from ssl import CERT_NONE
else:
    CERT_NONE = 0

# mypy does not read a branch for another Python version or platform: the assignment is first.
if sys.version_info < (3, 8):  # noqa: UP036
    from ssl import PROTOCOL_SSLv23 as LEGACY
else:
    LEGACY = 2

if sys.platform == "win32":
    from ssl import CERT_OPTIONAL as ON_WINDOWS
else:
    ON_WINDOWS = False

# A condition mypy cannot decide: it reads both branches, the import first.
if sys.argv:
    from ssl import CERT_REQUIRED
else:
    CERT_REQUIRED = 2  # type: ignore[assignment,misc]
