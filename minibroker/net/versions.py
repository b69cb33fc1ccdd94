"""The dispatcher's API table reshaped by options: capped to what an older Kafka release
served (``--as-version``, the ranges in config/kafka_releases.py) or per API
(``--max-api-versions``). The options are parsed in config/as_version.py; this applies them to
the handlers' registrations, which config may not import."""

from __future__ import annotations

import dataclasses

from minibroker_protocol.api_keys import ApiKey
from minibroker_storage.lazylog import get_logger

from ..config.as_version import CONSUMER_GROUP_APIS, before_4
from ..handlers.api import Api

log = get_logger("minibroker")


def cap_versions(apis: dict[int, Api], maxima: dict[int, int]) -> None:
    """Cap single APIs (``--max-api-versions``), after any ``--as-version``; an API whose
    maximum falls below the oldest version served is left out."""
    capped, dropped = [], []
    for key, newest in maxima.items():
        api = apis.get(key)
        if api is None or newest >= api.max_version:
            continue
        if newest < api.min_version:
            del apis[key]
            dropped.append(api.key.name)
        else:
            apis[key] = dataclasses.replace(api, max_version=newest)
            capped.append(f"{api.key.name} {api.min_version}-{newest}")
    log.info("broker.max_api_versions", capped=capped, left_out=dropped)


def cap(apis: dict[int, Api], release: str) -> None:
    """Cap ``apis`` (a dispatcher's registrations) in place to what ``release`` served."""
    from ..config.kafka_releases import RELEASES
    read_from, table = RELEASES[release]
    capped, dropped = [], []
    for key, api in list(apis.items()):
        served = table.get(int(key))
        if served is None or (before_4(release) and key in CONSUMER_GROUP_APIS):
            if key != ApiKey.ApiVersions:
                del apis[key]
                dropped.append(api.key.name)
            continue
        lo, hi = max(api.min_version, served[0]), min(api.max_version, served[1])
        if lo > hi:
            del apis[key]
            dropped.append(api.key.name)
        elif (lo, hi) != (api.min_version, api.max_version):
            apis[key] = dataclasses.replace(api, min_version=lo, max_version=hi)
            capped.append(f"{api.key.name} {lo}-{hi}")
    log.info("broker.as_version", release=release, read_from=f"kafka-clients {read_from}",
             capped=capped, left_out=dropped)
