"""InitProducerId for idempotent producers (no transactional.id).

Kafka hands such a producer a fresh id with epoch 0 whatever id and epoch the
request carries (KafkaApis.handleInitProducerIdRequest: "always blindly
accept the request"); a KIP-360 client asking again after a fatal sequence
error simply gets a new id.
"""

from __future__ import annotations

import structlog

from protocol.build import build
from protocol.errors import ErrorCode

from ..dispatch import Api
from .common import ZERO, response_cls

log = structlog.get_logger("minibroker.producer_id")

INIT_PRODUCER_ID = 22

# Kafka's transaction.max.timeout.ms default
TRANSACTION_MAX_TIMEOUT_MS = 900_000


class ProducerIdHandlers:
    def __init__(self, broker) -> None:
        self.broker = broker

    def apis(self) -> list[Api]:
        return [Api(INIT_PRODUCER_ID, 0, 5, self.init_producer_id)]

    def init_producer_id(self, ctx, req):
        R = response_cls(ctx)
        if req.transactional_id is not None:
            # The transaction coordinator is not built yet: refuse clearly
            # rather than hand a transactional producer an id nothing fences.
            log.warning("init_producer_id.refused", transactional_id=req.transactional_id,
                        reason="transactions are not supported yet", client_id=ctx.client_id)
            return build(R, throttle_time=ZERO, error_code=ErrorCode.invalid_request,
                         producer_id=-1, producer_epoch=-1)
        pid = self.broker.producer_ids.next_id()
        log.info("init_producer_id.assigned", producer_id=pid, producer_epoch=0,
                 previous_producer_id=getattr(req, "producer_id", -1),
                 previous_epoch=getattr(req, "producer_epoch", -1), client_id=ctx.client_id)
        return build(R, throttle_time=ZERO, error_code=ErrorCode.none, producer_id=pid,
                     producer_epoch=0)
