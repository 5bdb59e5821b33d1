"""spark-submit entry file: ``spark-submit dagger/entry.py CONFIG [--set KEY=VALUE] [--available-now]``.

spark-submit provides the master and the Spark settings; everything else is ``dagger run``. Ship the
package to executors with ``--py-files dist/dagger_on_spark.zip`` (``make dist``) on a cluster.
"""

import os
import sys

if __name__ == "__main__":
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if here not in sys.path:
        sys.path.insert(0, here)  # a checkout works without installing the package
    from dagger.cli import main

    sys.exit(main(["run", *sys.argv[1:]]))
