"""What the ``[spark]`` extra brings, checked before anything needs it.

Without this check a user who installed plain ``minibroker`` meets a traceback from deep
inside an import; with it, one line names the missing module and the pip command that
installs it.
"""

from __future__ import annotations

import importlib
import os
import shutil

# Import names of the extra's packages that Spark's side of minibroker needs in this process
# (confluent-kafka is only loaded by the readers, when they talk to a broker).
SPARK_MODULES = ("pyspark", "pyarrow")

INSTALL_HINT = "pip install 'minibroker[spark]' (from a checkout: pip install '.[spark]')"


class SparkExtraMissing(ImportError):
    """A module of the ``[spark]`` extra cannot be imported; ``str()`` says how to install it."""


def require_spark(what: str) -> None:
    """Raise ``SparkExtraMissing`` naming ``what`` (e.g. ``"minibroker audit"``) if the extra's
    modules cannot be imported."""
    for name in SPARK_MODULES:
        try:
            importlib.import_module(name)
        except ImportError as e:
            # An ImportError raised inside an installed pyspark (a missing py4j, a pyarrow built
            # for another numpy) is reported the same way: reinstalling the extra is the fix.
            raise SparkExtraMissing(
                f"{what} needs the [spark] extra ({name} cannot be imported: {e}): {INSTALL_HINT}",
                name=name) from e


def java_missing() -> bool:
    """True when Spark could not start its JVM here: no ``$JAVA_HOME/bin/java`` and no ``java``
    on PATH (pyspark's launcher looks in the same two places). Under ``spark-submit`` the JVM
    is already running, so nothing is missing."""
    if os.environ.get("PYSPARK_GATEWAY_PORT"):
        return False
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "java"), os.X_OK):
        return False
    return shutil.which("java") is None
