"""moto_server, answering one request at a time.

moto's TransactWriteItems snapshots whole tables and restores them on failure, which is not
safe when requests run in parallel threads: a failing transaction can undo another's
committed writes. DynamoDB itself applies transactions atomically, so the emulator is run
serially to behave the same.
"""
import sys

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import run_simple

run_simple("127.0.0.1", int(sys.argv[1]), DomainDispatcherApplication(create_backend_app), threaded=False)
