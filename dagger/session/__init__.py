"""The Spark session a job runs in and the processes around it: the session itself (:mod:`~dagger.session.spark`),
the jars from Maven Central (:mod:`~dagger.session.jars`), the JVM's class-data archive
(:mod:`~dagger.session.class_data`), the fork server and the worker daemon that start Python workers with their
libraries loaded (:mod:`~dagger.session.forkserver`, :mod:`~dagger.session.daemon`, whose workers log through
:mod:`~dagger.worker_logging`), the settings tuned for each job (:mod:`~dagger.session.tuning`) and the driver's PySpark
calls that keep pandas out of it (:mod:`~dagger.session.pandas_free`).

Imports nothing: the workers import their modules from here without loading the driver's.
"""
