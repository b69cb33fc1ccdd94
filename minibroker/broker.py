"""The broker's wiring: it builds storage, the coordinators, what the handlers are handed and
the background work, in that order (docs/architecture.md's map, bottom up), and hands each
its collaborators explicitly; ``app`` then builds the handlers and the dispatcher, binds the
listeners and starts the control plane. The handler families are handed the parts they
use (the log manager, a coordinator, a bound method below) by ``app.build_dispatcher``;
none receives the broker itself.

Who needs what:

* ``TransactionCoordinator``: the log manager, the ``__transaction_state`` appender
  (:meth:`Broker.internal_log`), the producer-id allocator, the clock, the crash points
  (tests only) and ``marker_written``, which wakes fetch waiters and tells the group
  coordinator about markers in ``__consumer_offsets``.
* ``GroupCoordinator``: the ``__consumer_offsets`` appender and partitioner, the data
  directory, the clock, and the transaction coordinator's ``verify_produce``.
* ``InternalTopics`` (:mod:`.coordinator.internal_topics`): where both keep their state and
  which node coordinates a key.
* ``Background`` (:mod:`.background.loops`): the log manager, both coordinators' snapshot
  capture, the transaction coordinator's two periodic checks and the group coordinator's poll
  (when the control plane's clock jumps).
* ``FetchWaiters`` (:mod:`.handlers.fetch_waiters`): woken by appends, markers and deletions.
"""

from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING, Any, cast

from minibroker_protocol.record_checks import RecordRules
from minibroker_protocol.topics import GROUP_METADATA_TOPIC, SHARE_GROUP_STATE_TOPIC, TRANSACTION_STATE_TOPIC
from minibroker_storage import meta
from minibroker_storage.config import FlushMode, FlushPolicy, LogConfig
from minibroker_storage.lazylog import get_logger
from minibroker_storage.manager import LogManager
from minibroker_storage.producer_ids import ProducerIdAllocator
from minibroker_storage.txn_history import TxnHistory

from .background.loops import Background, Snapshotting
from .cluster import Cluster
from .config.client_quotas import ClientQuotas
from .config.features import load_features
from .config.options import Config
from .control.request_counts import RequestCounts
from .coordinator import snapshot
from .coordinator.internal_topics import InternalTopics
from .coordinator.txn.timeline import Timeline
from .core.clock import SYSTEM_CLOCK, Clock
from .core.crash_points import CrashPoints
from .handlers.fetch_waiters import FetchWaiters

if TYPE_CHECKING:
    from .config.group_configs import GroupConfigs
    from .coordinator.group.consumer_group import TopicView
    from .coordinator.group.coordinator import GroupCoordinator
    from .coordinator.share.coordinator import ShareCoordinator
    from .coordinator.share.history import ShareHistory
    from .coordinator.txn.coordinator import TransactionCoordinator
    from .security.acl.authorizer import Authorizer

log = get_logger("minibroker.broker")

class Broker:
    def __init__(self, config: Config, *, clock: Clock = SYSTEM_CLOCK,
                 crash_points: CrashPoints | None = None) -> None:
        self.config = config
        self.node_id = config.node_id
        self.host, self.port = config.advertised(config.port)
        self.clock = clock
        # Its own: the points are armed (and given the fault book) once this broker serves.
        crash_points = crash_points if crash_points is not None else CrashPoints()
        self.crash_points = crash_points
        # registry.http.RegistryServer once --schema-registry-listener serves (app._start_registry);
        # the control listener's /metrics and console read it
        self.schema_registry: Any = None
        config.data_dir.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        # before meta.properties is made: a data dir without it is a new one (load_features)
        self.features = load_features(config)
        self.meta = meta.load_or_create(config.data_dir, config.node_id)
        self.cluster_id = self.meta["cluster.id"]
        # -- storage -----------------------------------------------------------------------
        self.default_log_config = LogConfig(
            segment_bytes=config.segment_bytes,
            segment_ms=config.segment_ms,
            retention_ms=config.retention_ms,
            retention_bytes=config.retention_bytes,
            producer_id_expiration_ms=config.producer_id_expiration_ms,
            # FsyncPolicy.parse only makes the three modes FlushMode names.
            flush=FlushPolicy(cast(FlushMode, config.fsync.mode), config.fsync.interval_ms,
                              background=True),
        )
        # Storage keeps the broker's time too (flush.ms and segment.ms deadlines, retention), so
        # a clock the control plane advances moves them as well; the system clock stays storage's own.
        self.logs = LogManager(config.data_dir, self.default_log_config,
                               clock=None if clock is SYSTEM_CLOCK else clock.wall_ms)
        # None with one broker: every placement check is skipped.
        self.cluster: Cluster | None = None
        if config.brokers > 1:
            self.cluster = Cluster(config.node_ids, config.data_dir)
            for t in self.logs.topics():
                self.cluster.observe(t.name, t.partitions)
            # leader epochs go on from where each log's last one began (leader-epoch-checkpoint)
            for (topic, partition), plog in self.logs.logs().items():
                if plog.leader_epoch:
                    self.cluster.epochs[(topic, partition)] = plog.leader_epoch
            self.cluster.on_epoch = self._leader_epoch
        self.producer_ids = ProducerIdAllocator(config.data_dir)
        # the decisions of the transaction coordinator, kept for `minibroker txn explain`
        self.txn_history = TxnHistory(config.data_dir)
        self.txn_history.open()
        if self.txn_history.skipped:
            log.warning("txn.history_lines_skipped", path=self.txn_history.path,
                        lines=self.txn_history.skipped, reason="torn or unreadable lines (a crash mid-write)")
        self.internal_topics = InternalTopics(self.logs, config, self.cluster, self.node_id)
        # the names the coordinators, handlers and control plane know them by
        self.internal_log = self.internal_topics.log
        self.coordinator_topic = self.internal_topics.coordinator_topic
        self.transaction_partition_for = self.internal_topics.transaction_partition_for
        self.offsets_partition_for = self.internal_topics.offsets_partition_for
        self.coordinator_node = self.internal_topics.coordinator_node

        # -- coordinators ------------------------------------------------------------------
        self.timeline = Timeline(self.txn_history, clock)
        self.timeline.broker_started()
        # The transaction coordinator: built at start when the data dir holds
        # __transaction_state, else on first need (the txn_coordinator property).
        self._txn_coordinator: TransactionCoordinator | None = None
        # each group's own configs: the group_configs property, read on first need
        self._group_configs: GroupConfigs | None = None
        # the client quotas AlterClientQuotas set, enforced by the dispatcher
        self.client_quotas = ClientQuotas.load(config.data_dir)
        # The group and share coordinators are built (their modules imported, their state
        # loaded) on first need when the data dir holds no state of theirs (_groups_needed).
        self._group_coordinator: GroupCoordinator | None = None
        self._share_coordinator: ShareCoordinator | None = None
        self._share_history: ShareHistory | None = None
        self._background_started = False
        # which coordinators the background loop snapshots: the group one joins when built
        self._snapshotting: list[tuple[str, Snapshotting]] = []
        if self.logs.topic(TRANSACTION_STATE_TOPIC) is not None:
            self._build_txn()
        eager_groups = self._has_group_state()
        if eager_groups:
            self._build_groups()

        # -- what the handlers are handed (app.build_dispatcher) ------------------------------
        self.fetch_waiters = FetchWaiters()
        # the client metrics subscriptions and receiver: made on first use (a telemetry, config
        # or admin request, the console), not on the way to the first answers
        self.authorizer = _authorizer(config)

        # -- background work ----------------------------------------------------------------
        self._snapshot_writer = snapshot.Writer()
        self.background = Background(
            config, self.logs,
            coordinators=self._snapshotting,
            abort_timed_out=self._abort_timed_out,
            expire_ids=self._expire_ids,
            poll_groups=self._poll_coordinators,
            snapshot_writer=self._snapshot_writer, clock=clock,
            expire_tokens=self.expire_delegation_tokens)

        # Offsets first: rolling a prepared transaction forward may complete
        # transactional offset commits.
        if self._group_coordinator is not None:
            self._group_coordinator.load()
        if self._txn_coordinator is not None:
            self._txn_coordinator.load()
        if self._share_coordinator is not None:
            self._share_coordinator.load()
        log.info("broker.storage_opened", data_dir=str(config.data_dir),
                 topics=len(self.logs.topics()),
                 ms=round((time.perf_counter() - t0) * 1000, 1))

        # -- listeners (app binds them) and the control plane ------------------------------
        self.bound_port = config.port
        self.request_counts = RequestCounts()
        # Virtual brokers: each node's advertised (host, port), once its listener is bound.
        self.node_endpoints: dict[int, tuple[str, int]] = {}
        self._record_rules: dict[str, tuple[object, RecordRules]] = {}

    # -- the transaction coordinator, built on first need ---------------------------------
    def _build_txn(self) -> TransactionCoordinator:
        from .coordinator.txn.coordinator import TransactionCoordinator
        config = self.config
        coordinator = TransactionCoordinator(
            logs=self.logs, internal_log=self.internal_log, producer_ids=self.producer_ids,
            data_dir=config.data_dir, marker_written=self._marker_written,
            max_timeout_ms=config.transaction_max_timeout_ms,
            id_expiration_ms=config.transactional_id_expiration_ms,
            clock=self.clock, crash=self.crash_points,
            transaction_version=lambda: self.features.transaction_version, timeline=self.timeline)
        self._txn_coordinator = coordinator
        self._snapshotting.append(("txn", coordinator))
        return coordinator

    @property
    def txn_coordinator(self) -> TransactionCoordinator:
        """Built at start when the data dir holds __transaction_state (its replay rolls
        prepared transactions forward); otherwise on first need (an InitProducerId, a Produce,
        a group coordinator, the control plane): it holds nothing until then, and its modules
        are not on the way to a start's first Metadata answer (issue 33)."""
        if self._txn_coordinator is None:
            self._build_txn().load()  # no __transaction_state: nothing to replay
        assert self._txn_coordinator is not None
        return self._txn_coordinator

    def _abort_timed_out(self, *args, **kwargs) -> int:
        if self._txn_coordinator is None:  # no transaction was ever begun
            return 0
        return self._txn_coordinator.abort_timed_out(*args, **kwargs)

    def _expire_ids(self, *args, **kwargs) -> int:
        if self._txn_coordinator is None:
            return 0
        return self._txn_coordinator.expire_ids(*args, **kwargs)

    @property
    def group_configs(self) -> GroupConfigs:
        """Each group's own configs (IncrementalAlterConfigs on GROUP resources), which the
        group coordinator reads over the broker's group.* defaults. Loaded on first need (a
        group coordinator, a configs or admin request): its module and file are not on the
        way to a start's first answers (issue 33)."""
        if self._group_configs is None:
            from .config.group_configs import GroupConfigs
            self._group_configs = GroupConfigs.load(self.config)
        return self._group_configs

    # -- the group and share coordinators, built on first need ---------------------------
    def _has_group_state(self) -> bool:
        """Whether the data dir holds what the group or share coordinator loads at start: then
        both are built and loaded at start, as before issue 33 (a prepared transaction rolled
        forward must find the transactional offset commits it completes). Without it they
        hold nothing until a client asks, so they are built then (Kafka, too, loads a
        coordinator's state when it becomes the partition's leader, apart from serving)."""
        return (self.logs.topic(GROUP_METADATA_TOPIC) is not None
                or self.logs.topic(SHARE_GROUP_STATE_TOPIC) is not None)

    def _build_groups(self) -> None:
        from .coordinator.group.consumer_group import ConsumerGroupSettings
        from .coordinator.group.coordinator import GroupCoordinator
        from .coordinator.group.store import BrokerOffsetsTopic
        from .coordinator.share.coordinator import ShareCoordinator
        from .coordinator.share.dlq import DeadLetterQueues
        from .coordinator.share.history import ShareHistory

        config, clock, crash_points = self.config, self.clock, self.crash_points
        group_coordinator = GroupCoordinator(
            offsets_topic=BrokerOffsetsTopic(self.logs, self.internal_log,
                                             self.offsets_partition_for),
            data_dir=config.data_dir, verify_produce=self.txn_coordinator.verify_produce,
            clock=clock, initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
            topics=self.assignable_topics,
            consumer_settings=ConsumerGroupSettings(
                session_timeout_ms=config.group_consumer_session_timeout_ms,
                heartbeat_interval_ms=config.group_consumer_heartbeat_interval_ms,
                assignment_interval_ms=config.group_consumer_assignment_interval_ms),
            group_config=self.group_configs.group_int,
            create_topic=self._create_streams_internal_topic)
        if crash_points.snapshot_records is not None:
            group_coordinator.snapshots.every_records = crash_points.snapshot_records
        # share groups: membership records in __consumer_offsets (through the group
        # coordinator, which replays them back), share-partition state in __share_group_state
        # every change of a share record's state, for `minibroker share explain`, the console
        # and /metrics
        share_history = ShareHistory(config.data_dir)
        share_history.open(now_ms=clock.wall_ms())
        if share_history.skipped:
            log.warning("share.history_lines_skipped", path=share_history.path,
                        lines=share_history.skipped,
                        reason="torn or unreadable lines (a crash mid-write)")
        share_coordinator = ShareCoordinator(
            logs=self.logs,
            state_log=lambda p: self.internal_log(SHARE_GROUP_STATE_TOPIC, p),
            write_group_records=group_coordinator.write_share_records,
            group_config=self.group_configs.group_config, clock=clock,
            notify=lambda t, p: self.fetch_waiters.notify(t, p),
            is_other_group=lambda g: g in group_coordinator.groups,
            history=share_history,
            leads=lambda node, t, p: self.cluster is None or not self.cluster.not_leader(node, t, p),
            dlq=DeadLetterQueues(
                logs=self.logs, clock=clock,
                enabled=lambda: self.features.share_version >= 2,  # ShareVersion.SV_2
                group_config=self.group_configs.group_config,
                notify=lambda t, p: self.fetch_waiters.notify(t, p),
                max_message_bytes=self.max_message_bytes,
                # createTopicBuilder: the default partition count and replication factor (-1)
                create_topic=(lambda name, configs: self.create_topic(
                    name, config.num_partitions, configs, reason="share_dlq",
                    replication_factor=config.default_replication_factor))
                if config.errors_deadletterqueue_auto_create_topics_enable else None,
                prefix=config.errors_deadletterqueue_topic_name_prefix))
        group_coordinator.set_share_hooks(share_coordinator.replay_group_record,
                                          share_coordinator.snapshot_records)
        self._group_coordinator = group_coordinator
        self._share_coordinator = share_coordinator
        if self._share_history is None:  # not a stand-in set meanwhile (the setter)
            self._share_history = share_history
        self._snapshotting.append(("group", group_coordinator))

    def _groups(self) -> None:
        """Build and load both coordinators now (a request, a marker or a view needs one)."""
        if self._group_coordinator is not None:
            return
        t0 = time.perf_counter()
        self._build_groups()
        assert self._group_coordinator is not None and self._share_coordinator is not None
        self._group_coordinator.load()
        self._share_coordinator.load()
        if self._background_started:
            self._share_coordinator.start()
        log.info("broker.group_coordinators_loaded", ms=round((time.perf_counter() - t0) * 1000, 1))

    @property
    def group_coordinator(self) -> GroupCoordinator:
        self._groups()
        assert self._group_coordinator is not None
        return self._group_coordinator

    @property
    def share_coordinator(self) -> ShareCoordinator:
        self._groups()
        assert self._share_coordinator is not None
        return self._share_coordinator

    @property
    def share_history(self) -> ShareHistory:
        if self._share_history is None:
            self._groups()
        assert self._share_history is not None
        return self._share_history

    @share_history.setter
    def share_history(self, history: ShareHistory) -> None:
        # the console's tests hand a broker a stand-in history
        self._share_history = history

    def share_connection_closed(self, connection_id: str) -> None:
        # no share coordinator yet: no share session to end
        if self._share_coordinator is not None:
            self._share_coordinator.connection_closed(connection_id)

    def share_stop_serving(self) -> None:
        if self._share_coordinator is not None:
            self._share_coordinator.stop_serving()

    @functools.cached_property
    def _client_metrics_pair(self):
        return _client_metrics(self.config, self.clock)

    @property
    def client_metrics(self):
        """KIP-714's subscriptions (ClientMetricsManager), read from the data dir on first use."""
        return self._client_metrics_pair[0]

    @property
    def received_metrics(self):
        """What clients pushed (ReceivedMetrics), with telemetry served; else None."""
        return self._client_metrics_pair[1]

    @functools.cached_property
    def sasl_credentials(self):
        """The SASL users (--sasl-users and AlterUserScramCredentials), read on first use."""
        from .security.sasl.credentials import Credentials, read_users_file
        users = read_users_file(self.config.sasl_users) if self.config.sasl_users else {}
        return Credentials(users, self.config.data_dir)

    @functools.cached_property
    def delegation_tokens(self):
        """Delegation tokens (--delegation-token-secret-key), read on first use."""
        from .security.tokens import DelegationTokens
        c = self.config
        return DelegationTokens(c.delegation_token_secret_key, self.clock.wall_ms,
                                max_lifetime_ms=c.delegation_token_max_lifetime_ms,
                                expiry_time_ms=c.delegation_token_expiry_time_ms,
                                data_dir=c.data_dir)

    def expire_delegation_tokens(self, now: int | None = None) -> int:
        """The controller's periodic sweep of expired tokens (nothing to do without a key)."""
        if self.config.delegation_token_secret_key is None:
            return 0
        return self.delegation_tokens.sweep(now)

    def set_bound_port(self, port: int) -> None:
        self.bound_port = port
        self.host, self.port = self.config.advertised(port)

    # -- topics ----------------------------------------------------------------
    def topic(self, name: str):
        return self.logs.topic(name)

    def topics(self):
        return self.logs.topics()

    def topic_by_id(self, topic_id):
        return self.logs.topic_by_id(topic_id)

    def topic_name_by_id(self, topic_id) -> str | None:
        info = self.logs.topic_by_id(topic_id)
        return info.name if info is not None else None

    def create_topic(self, name: str, partitions: int, configs: dict[str, str] | None = None,
                     reason: str = "create_topics", replication_factor: int = 1,
                     assignments: dict[int, list[int]] | None = None):
        # storage logs the creation with the topic id; the reason is only worth a debug line
        log.debug("topic.create", topic=name, reason=reason)
        info = self.logs.create_topic(name, partitions, configs or {})
        if self.cluster is not None:
            self.cluster.set_replication(name, replication_factor)
            self.cluster.assign(name, assignments or {})
            self.cluster.observe(name, partitions)
        return info

    def _create_streams_internal_topic(self, name: str, partitions: int, replication_factor: int,
                                       configs: dict[str, str]) -> None:
        """A streams group's repartition or changelog topic, created by its coordinator
        (Kafka's GroupCoordinatorService through AutoTopicCreationManager); replication factor
        0 means the broker's default."""
        if self.topic(name) is not None:
            return
        self.create_topic(name, partitions, configs, reason="streams_internal_topic",
                          replication_factor=replication_factor
                          or self.config.default_replication_factor)

    # -- internal topics -------------------------------------------------------------
    def existing_log(self, topic: str, partition: int):
        return self.get_log(topic, partition) if self.topic(topic) is not None else None

    def assignable_topics(self) -> list[TopicView]:
        """What a consumer group's assignment is made of: every topic, the internal ones too, as
        Kafka's GroupMetadataManager.refreshRegularExpressions matches the regexes against every
        topic of the metadata image (franz-go's Test848RegexBrokerResolves relies on it)."""
        from .coordinator.group.consumer_group import TopicView  # the group coordinator's: loaded
        return [TopicView(t.name, t.topic_id, t.partitions) for t in self.logs.topics()]

    def max_message_bytes(self, info) -> int:
        value = info.configs.get("max.message.bytes")
        return int(value) if value is not None else self.config.message_max_bytes

    def min_insync_replicas(self, info) -> int:
        value = info.configs.get("min.insync.replicas")
        return int(value) if value is not None else self.config.min_insync_replicas

    def record_rules(self, info) -> RecordRules:
        """What LogValidator checks of each record of the topic: its message.timestamp.* configs
        (the broker's log.message.timestamp.* when unset) and whether it is compacted, where
        every record needs a key (LogValidator.validateKey). Asked at every append: kept while
        the topic's configs are the same object (the catalog makes a new one when they change)."""
        cached = self._record_rules.get(info.name)
        if cached is not None and cached[0] is info.configs:
            return cached[1]
        rules = self._make_record_rules(info.configs)
        self._record_rules[info.name] = (info.configs, rules)
        return rules

    def _make_record_rules(self, c) -> RecordRules:
        policy = c.get("cleanup.policy", "delete")
        return RecordRules(
            timestamp_type=c.get("message.timestamp.type", self.config.log_message_timestamp_type),
            before_max_ms=int(c.get("message.timestamp.before.max.ms",
                                    self.config.log_message_timestamp_before_max_ms)),
            after_max_ms=int(c.get("message.timestamp.after.max.ms",
                                   self.config.log_message_timestamp_after_max_ms)),
            compacted="compact" in [x.strip() for x in policy.split(",")])

    def last_stable_offset(self, topic: str, partition: int) -> int:
        return self.get_log(topic, partition).last_stable_offset

    def _leader_epoch(self, topic: str, partition: int, epoch: int) -> None:
        plog = self.logs.get_log(topic, partition)
        if plog is not None:
            plog.become_leader(epoch)
        share = self._share_coordinator
        if share is not None:  # none yet: no share partition to unload
            share.leader_changed(topic, partition)

    def add_partitions(self, name: str, count: int, assignments: dict[int, list[int]] | None = None) -> None:
        """CreatePartitions: the topic grows to ``count`` partitions, with the replicas given."""
        self.logs.add_partitions(name, count)
        if self.cluster is not None:
            self.cluster.assign(name, assignments or {})
            self.cluster.observe(name, count)
        log.info("topic.partitions_added", topic=name, partitions=count)

    def delete_topic(self, name: str) -> None:
        info = self.logs.topic(name)
        self.logs.delete_topic(name)
        self._record_rules.pop(name, None)
        if info is not None and self._share_coordinator is not None:  # none yet: no share state
            self._share_coordinator.topic_deleted(info.topic_id, name)
        if self.cluster is not None:
            self.cluster.forget(name)
        self.fetch_waiters.notify_topic(name)

    def get_log(self, topic: str, partition: int):
        return self.logs.get_log(topic, partition)

    # -- what the coordinators are told -------------------------------------------------
    def _marker_written(self, topic: str, partition: int, producer_id: int, commit: bool) -> None:
        if topic == GROUP_METADATA_TOPIC:
            self.group_coordinator.on_marker(partition, producer_id, commit)
        self.fetch_waiters.notify(topic, partition)

    # -- fetch waiters (the handlers' names for them) ----------------------------------
    def notify_append(self, topic: str, partition: int) -> None:
        self.fetch_waiters.notify(topic, partition)

    async def wait_for_append(self, partitions: list[tuple[str, int]], timeout: float) -> None:
        await self.fetch_waiters.wait(partitions, timeout)

    # -- the control plane's clock -------------------------------------------------------
    def clock_advanced(self, by_ms: float) -> dict[str, int]:
        """The control plane moved the clock by ``by_ms``: the background work catches up."""
        return self.background.catch_up()

    def _poll_coordinators(self) -> None:
        if self._group_coordinator is None or self._share_coordinator is None:
            return  # not built: no group, nothing due
        self._group_coordinator.poll()
        self._share_coordinator.poll()

    # -- share groups (the console's view) ---------------------------------------------
    def share_partition(self, group: str, topic: str, partition: int):
        return self.share_coordinator.share_partition(group, topic, partition)

    def share_groups(self) -> list[str]:
        return [gid for gid, _state in self.share_coordinator.share_groups()]

    # -- background work and shutdown --------------------------------------------------
    def start_background(self) -> None:
        self.background.start()
        self._background_started = True
        if self._share_coordinator is not None:
            self._share_coordinator.start()

    async def stop(self) -> None:
        if self._share_coordinator is not None:
            self._share_coordinator.close()
        await self.background.stop()
        t0 = time.perf_counter()
        # Captured before the logs close, written after: by then the logs they cover
        # are flushed, so a snapshot never claims offsets the disk does not hold.
        final = self.background.final_snapshots()
        self.logs.close_all()
        self.timeline.broker_stopped()
        self.txn_history.close()
        if self._share_history is not None:
            self._share_history.close()
        for name, ticket, captured in final:
            self._snapshot_writer.write(name, ticket, captured, "shutdown")
        log.info("broker.storage_closed", ms=round((time.perf_counter() - t0) * 1000, 1))


def _client_metrics(config: Config, clock: Clock):
    """KIP-714: the subscriptions the data dir holds, and (with telemetry served) the receiver
    of what clients push."""
    from minibroker_storage import client_metrics as store

    from .client_metrics.manager import ClientMetricsManager

    try:
        subscriptions = store.load(config.data_dir)
    except store.ClientMetricsFileError as e:
        log.warning("telemetry.subscriptions_unreadable", reason=str(e))
        subscriptions = {}
    received = None
    if config.telemetry_enabled:  # its OTLP decoder is imported only then
        from .client_metrics.received import ReceivedMetrics
        received = ReceivedMetrics(clock)
    manager = ClientMetricsManager(
        clock=clock, max_bytes=config.telemetry_max_bytes,
        receiver=received.receive if received is not None else None,
        subscriptions=subscriptions, save=lambda subs: store.save(config.data_dir, subs))
    return manager, received


def _authorizer(config: Config) -> Authorizer | None:
    """Kafka's StandardAuthorizer with --authorizer standard (its ACLs in the data dir's
    acls.json); None without, as Kafka without authorizer.class.name authorizes nothing."""
    if config.authorizer != "standard":
        return None
    from .security.acl.authorizer import Authorizer
    return Authorizer(config.data_dir, super_users=config.super_users,
                      allow_everyone_if_no_acl_found=config.allow_everyone_if_no_acl_found)
