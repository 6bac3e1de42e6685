"""gpunet: the Python client of the gpunet network.

Submit jobs, follow their logs, fetch their outputs, deploy services and
send SYNC with the same home, keyring and node as the ``gpunet`` CLI:

    import gpunet
    c = gpunet.Client()                                   # ~/.gpunet
    job = c.submit("examples/wordcount/job.yaml", key="alice")
    print(c.wait(job).state)                              # succeeded
    c.outputs(job, "result")

Every error is a gpunet.Error; API errors (gpunet.APIError) carry the
API's stable ``code``; spec errors (gpunet.SpecError) list each problem's
field, line and column. docs/python.md is the reference.
"""

from .aio import AsyncClient
from .client import Client, Services, sign_ticket
from .errors import (APIError, Error, IntegrityError, JobFailed, KeyNotFound, KeyringError, NoPassphrase,
                     NotInBlockYet, NotOwnerError, PriceError, SpecError, SpecProblem, TxError, Unmet, UnmetError,
                     Unreachable, UsageError, WrongPassphrase)
from .jobspec import Spec, load_spec, parse_spec
from .keyring import Key, Keyring
from .types import (Assignment, Balance, Deployed, Event, Job, JobResult, Offer, Quote, QuoteOffer, Service,
                    ServiceQuote, Status, TxResult)

__version__ = "0.1.0"

__all__ = [
    "APIError", "Assignment", "AsyncClient", "Balance", "Client", "Deployed", "Error", "Event", "IntegrityError",
    "Job", "JobFailed", "JobResult", "Key", "KeyNotFound", "Keyring", "KeyringError", "NoPassphrase",
    "NotInBlockYet", "NotOwnerError", "Offer", "PriceError", "Quote", "QuoteOffer", "Service", "ServiceQuote",
    "Services", "Spec", "SpecError", "SpecProblem", "Status", "TxError", "TxResult", "Unmet", "UnmetError",
    "Unreachable", "UsageError",
    "WrongPassphrase", "load_spec", "parse_spec", "sign_ticket",
]
