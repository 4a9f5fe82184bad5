"""The group APIs on the wire: kio request bodies in, kio response entities out, every version.

``handle(coordinator, api_key, api_version, body, client_id, client_host)`` answers OffsetCommit
(v2-8), OffsetFetch (v1-7), JoinGroup (v0-7), Heartbeat (v0-4), LeaveGroup (v0-4),
SyncGroup (v0-5), DescribeGroups (v0-6) and ListGroups (v0-5) with the response entity of the
request's version, built with ``broker.wire.build`` (so every field a version has is filled,
and those it lacks are dropped).  The broker encodes it with ``broker.wire.encode_response``.

``find_coordinator_response(version, body, coordinator_for)`` answers FindCoordinator v0-3 from
the broker's own metadata: ``coordinator_for(group_id)`` returns the ``(node_id, host, port)`` of
the leader of the group's ``__consumer_offsets`` partition (``GroupCoordinator.partition_for``
/ ``records.partition_for``) or a Kafka error code (COORDINATOR_NOT_AVAILABLE while the topic or
its leader does not exist).  Transaction coordinators (key_type 1) do not exist here:
COORDINATOR_NOT_AVAILABLE; other key types: INVALID_REQUEST.

Per-version rules kept here, as Kafka's ``KafkaApis`` and request classes keep them:

* JoinGroup v0 has no rebalance timeout: the session timeout is used; v4+ requires a known
  member id (MEMBER_ID_REQUIRED); v0-6 send ``""`` for an unknown protocol name, v7 null.
* SyncGroup v5+ must carry protocol type and name (else INCONSISTENT_GROUP_PROTOCOL).
* LeaveGroup v0-2 name one member and get one error (the group's, else the member's); v3+ name
  a batch and get an error per member.
* OffsetCommit v2-4 ``retention_time`` (if not -1) gives the commit an expire timestamp (so it
  is written as OffsetCommitValue v1, as Kafka does); v6+ carry the leader epoch.
* OffsetFetch v1 has no group-level error: a group error is repeated in every requested
  partition; v2+ put it at the top with no topics; ``topics=None`` (v2+) means all committed.
* DescribeGroups v6+ answers a group that does not exist with GROUP_ID_NOT_FOUND and an error
  message (KIP-1043; older versions: state "Dead", no error); authorized operations (v3+) are
  the GROUP operations Kafka reports without an authorizer (READ, DELETE, DESCRIBE) when asked.
* ListGroups v4+ filters by state, v5+ by type: every group here is "classic" (KIP-848 names).

``not_available_response(api_key, version, body, error)`` answers any group API with one error
everywhere it can carry one (the broker uses it while its coordinator is not started yet).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.protocol import ResponsePayload

from broker.wire.apis import ApiKey
from broker.wire.build import build
from broker.wire.response import response_class

from .coordinator import DEAD_GROUP, GroupCoordinator, OffsetAndMetadata

__all__ = ["GROUP_APIS", "find_coordinator_response", "handle", "not_available_response"]

GROUP_APIS = frozenset(
    {
        ApiKey.OFFSET_COMMIT,
        ApiKey.OFFSET_FETCH,
        ApiKey.JOIN_GROUP,
        ApiKey.HEARTBEAT,
        ApiKey.LEAVE_GROUP,
        ApiKey.SYNC_GROUP,
        ApiKey.DESCRIBE_GROUPS,
        ApiKey.LIST_GROUPS,
    }
)
"""The APIs ``handle`` answers (FindCoordinator is ``find_coordinator_response``)."""

_MS = datetime.timedelta(milliseconds=1)

# Errors.message() of the errors FindCoordinator can carry (Kafka's Errors.java).
_ERROR_MESSAGES = {
    ErrorCode.none: "NONE",
    ErrorCode.coordinator_load_in_progress: (
        "The coordinator is loading and hence can't process requests."
    ),
    ErrorCode.coordinator_not_available: "The coordinator is not available.",
    ErrorCode.not_coordinator: "This is not the correct coordinator.",
    ErrorCode.invalid_request: (
        "This most likely occurs because of a request being malformed by the client library or "
        "the message was sent to an incompatible broker. See the broker logs for more details."
    ),
}


def _ms(value: Any) -> int:
    """A kio ``*Timedelta`` field (or a plain int) as integer milliseconds."""
    if isinstance(value, datetime.timedelta):
        return int(value // _MS)
    return int(value)


def _respond(api_key: ApiKey, version: int, data: dict[str, Any]) -> ResponsePayload:
    data.setdefault("throttle_time", 0)
    return build(response_class(api_key, version), data)


async def handle(
    coordinator: GroupCoordinator,
    api_key: int,
    api_version: int,
    body: Any,
    client_id: str | None,
    client_host: str,
) -> ResponsePayload:
    """The response to one group request (a kio request ``body`` of ``api_version``).

    JoinGroup, SyncGroup and OffsetCommit may wait (a rebalance, the leader's assignment, an
    acks=all append): run each request in its own task; cancelling it is safe.
    """
    key = ApiKey(api_key)
    v = api_version
    if key == ApiKey.JOIN_GROUP:
        return await _join_group(coordinator, v, body, client_id or "", client_host)
    if key == ApiKey.SYNC_GROUP:
        return await _sync_group(coordinator, v, body)
    if key == ApiKey.HEARTBEAT:
        error = coordinator.heartbeat(
            str(body.group_id),
            int(body.generation_id),
            body.member_id,
            group_instance_id=getattr(body, "group_instance_id", None),
        )
        return _respond(key, v, {"error_code": error})
    if key == ApiKey.LEAVE_GROUP:
        return _leave_group(coordinator, v, body)
    if key == ApiKey.OFFSET_COMMIT:
        return await _offset_commit(coordinator, v, body)
    if key == ApiKey.OFFSET_FETCH:
        return _offset_fetch(coordinator, v, body)
    if key == ApiKey.DESCRIBE_GROUPS:
        return _describe_groups(coordinator, v, body)
    if key == ApiKey.LIST_GROUPS:
        return _list_groups(coordinator, v, body)
    raise ValueError(f"{key.name} is not a group API (FindCoordinator: find_coordinator_response)")


async def _join_group(
    c: GroupCoordinator, v: int, body: Any, client_id: str, client_host: str
) -> ResponsePayload:
    session_timeout_ms = _ms(body.session_timeout)
    rebalance_timeout_ms = _ms(body.rebalance_timeout) if v >= 1 else session_timeout_ms
    result = await c.join_group(
        str(body.group_id),
        body.member_id,
        protocol_type=body.protocol_type,
        protocols=[(p.name, p.metadata) for p in body.protocols],
        session_timeout_ms=session_timeout_ms,
        rebalance_timeout_ms=rebalance_timeout_ms,
        client_id=client_id,
        client_host=client_host,
        require_known_member_id=v >= 4,
        group_instance_id=getattr(body, "group_instance_id", None),
    )
    return _respond(
        ApiKey.JOIN_GROUP,
        v,
        {
            "error_code": result.error,
            "generation_id": result.generation_id,
            "protocol_type": result.protocol_type,
            "protocol_name": result.protocol_name if v >= 7 else (result.protocol_name or ""),
            "leader": result.leader,
            "skip_assignment": False,
            "member_id": result.member_id,
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "metadata": m.metadata,
                }
                for m in result.members
            ],
        },
    )


async def _sync_group(c: GroupCoordinator, v: int, body: Any) -> ResponsePayload:
    protocol_type = getattr(body, "protocol_type", None)
    protocol_name = getattr(body, "protocol_name", None)
    if v >= 5 and (protocol_type is None or protocol_name is None):
        return _respond(
            ApiKey.SYNC_GROUP,
            v,
            {"error_code": ErrorCode.inconsistent_group_protocol, "assignment": b""},
        )
    result = await c.sync_group(
        str(body.group_id),
        int(body.generation_id),
        body.member_id,
        assignments={a.member_id: a.assignment for a in body.assignments},
        protocol_type=protocol_type,
        protocol_name=protocol_name,
        group_instance_id=getattr(body, "group_instance_id", None),
    )
    return _respond(
        ApiKey.SYNC_GROUP,
        v,
        {
            "error_code": result.error,
            "protocol_type": result.protocol_type,
            "protocol_name": result.protocol_name,
            "assignment": result.assignment,
        },
    )


def _leave_group(c: GroupCoordinator, v: int, body: Any) -> ResponsePayload:
    if v <= 2:
        result = c.leave_group(str(body.group_id), [(body.member_id, None)])
        error = result.error
        if error == ErrorCode.none:
            error = next((m.error for m in result.members if m.error), ErrorCode.none)
        return _respond(ApiKey.LEAVE_GROUP, v, {"error_code": error})
    result = c.leave_group(
        str(body.group_id), [(m.member_id, m.group_instance_id) for m in body.members]
    )
    return _respond(
        ApiKey.LEAVE_GROUP,
        v,
        {
            "error_code": result.error,
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "error_code": m.error,
                }
                for m in result.members
            ],
        },
    )


async def _offset_commit(c: GroupCoordinator, v: int, body: Any) -> ResponsePayload:
    now_ms = c.clock.time_ms()
    retention = getattr(body, "retention_time", None)
    retention_ms = -1 if retention is None else _ms(retention)
    expire_ms = now_ms + retention_ms if retention_ms != -1 else -1
    entries: list[tuple[str, int, OffsetAndMetadata]] = []
    for topic in body.topics:
        for p in topic.partitions:
            entries.append(
                (
                    str(topic.name),
                    int(p.partition_index),
                    OffsetAndMetadata(
                        offset=int(p.committed_offset),
                        metadata=p.committed_metadata or "",
                        leader_epoch=int(getattr(p, "committed_leader_epoch", -1)),
                        commit_timestamp_ms=now_ms,
                        expire_timestamp_ms=expire_ms,
                    ),
                )
            )
    errors = await c.commit_offsets(
        str(body.group_id),
        int(body.generation_id_or_member_epoch),
        body.member_id,
        entries,
        group_instance_id=getattr(body, "group_instance_id", None),
    )
    it = iter(errors)
    topics = [
        {
            "name": topic.name,
            "partitions": [
                {"partition_index": p.partition_index, "error_code": next(it)}
                for p in topic.partitions
            ],
        }
        for topic in body.topics
    ]
    return _respond(ApiKey.OFFSET_COMMIT, v, {"topics": topics})


def _offset_fetch(c: GroupCoordinator, v: int, body: Any) -> ResponsePayload:
    requested = (
        None
        if body.topics is None
        else [(str(t.name), int(p)) for t in body.topics for p in t.partition_indexes]
    )
    error, rows = c.fetch_offsets(str(body.group_id), requested)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    if error and v < 2:
        # No group-level error field before v2: every requested partition carries it.
        for topic, partition in requested or ():
            by_topic.setdefault(topic, []).append(_fetched(partition, None, error))
    elif not error:
        for topic, partition, committed in rows:
            by_topic.setdefault(topic, []).append(_fetched(partition, committed, 0))
    return _respond(
        ApiKey.OFFSET_FETCH,
        v,
        {
            "error_code": error,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
        },
    )


def _fetched(partition: int, committed: OffsetAndMetadata | None, error: int) -> dict[str, Any]:
    return {
        "partition_index": partition,
        "committed_offset": -1 if committed is None else committed.offset,
        "committed_leader_epoch": -1 if committed is None else committed.leader_epoch,
        "metadata": "" if committed is None else committed.metadata,
        "error_code": error,
    }


def find_coordinator_response(
    version: int,
    body: Any,
    coordinator_for: Callable[[str], tuple[int, str, int] | int],
) -> ResponsePayload:
    """FindCoordinator v0-3 (one key): ``coordinator_for(key)`` gives the group coordinator's
    ``(node_id, host, port)`` or an error code.  Errors carry node -1, host "", port -1 and
    Kafka's error message (v1+); success carries the message "NONE", as Kafka's does."""
    key_type = int(getattr(body, "key_type", 0))
    found: tuple[int, str, int] | int
    if key_type == 0:
        found = coordinator_for(body.key)
    elif key_type == 1:
        found = ErrorCode.coordinator_not_available  # no transaction coordinator here
    else:
        found = ErrorCode.invalid_request
    if isinstance(found, tuple):
        error = 0
        node_id, host, port = found
    else:
        error, node_id, host, port = int(found), -1, "", -1
    code = ErrorCode(error)
    return _respond(
        ApiKey.FIND_COORDINATOR,
        version,
        {
            "error_code": code,
            "error_message": _ERROR_MESSAGES.get(code, code.name.upper()),
            "node_id": node_id,
            "host": host,
            "port": port,
        },
    )


# Kafka's AclOperation codes: READ 3, DELETE 6, DESCRIBE 8 (a GROUP's operations, all allowed
# without an authorizer); Int.MinValue when not asked for.
_GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)
_NO_OPERATIONS = -(2**31)
CLASSIC = "classic"


def _describe_groups(c: GroupCoordinator, v: int, body: Any) -> ResponsePayload:
    ops = _GROUP_OPERATIONS if getattr(body, "include_authorized_operations", False) else None
    groups = []
    for group_id in body.groups:
        error, summary = c.describe_group(str(group_id))
        message = None
        if error == ErrorCode.none and summary is DEAD_GROUP and v >= 6:
            error, message = ErrorCode.group_id_not_found, f"Group {group_id} not found."
        elif error != ErrorCode.none:
            message = _ERROR_MESSAGES.get(ErrorCode(error))
        groups.append(_described(str(group_id), int(error), message, summary, ops))
    return _respond(ApiKey.DESCRIBE_GROUPS, v, {"groups": groups})


def _described(group_id: str, error: int, message: str | None, summary: Any,
               ops: int | None) -> dict[str, Any]:
    return {
        "error_code": ErrorCode(error),
        "error_message": message,
        "group_id": group_id,
        "group_state": summary.state,
        "protocol_type": summary.protocol_type,
        "protocol_data": summary.protocol,
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "member_metadata": m.metadata,
                "member_assignment": m.assignment,
            }
            for m in summary.members
        ],
        "authorized_operations": _NO_OPERATIONS if ops is None else ops,
    }


def _list_groups(c: GroupCoordinator, v: int, body: Any) -> ResponsePayload:
    states = tuple(getattr(body, "states_filter", ()) or ())
    types = {t.lower() for t in getattr(body, "types_filter", ()) or ()}
    error, overviews = c.list_groups(states)
    if types and CLASSIC not in types:
        overviews = []
    return _respond(
        ApiKey.LIST_GROUPS,
        v,
        {
            "error_code": error,
            "groups": [
                {
                    "group_id": o.group_id,
                    "protocol_type": o.protocol_type,
                    "group_state": o.state,
                    "group_type": CLASSIC,
                }
                for o in overviews
            ],
        },
    )


def not_available_response(api_key: int, version: int, body: Any, error: int) -> ResponsePayload:
    """Any group API (FindCoordinator included) answered with ``error`` wherever the response
    has an error field: the top level, each partition (OffsetCommit, OffsetFetch v1), each
    member (LeaveGroup v3+), each group (DescribeGroups).  Kafka's answers while its group
    coordinator is not active are of this form (``validateGroupStatus``)."""
    key = ApiKey(api_key)
    code = ErrorCode(error)
    data: dict[str, Any] = {
        "error_code": code,
        "error_message": _ERROR_MESSAGES.get(code),
        "node_id": -1, "host": "", "port": -1,  # FindCoordinator
        "generation_id": -1, "protocol_type": None, "protocol_name": None, "leader": "",
        "skip_assignment": False, "member_id": getattr(body, "member_id", "") or "",
        "members": [], "assignment": b"", "groups": [], "topics": [],
    }
    if key == ApiKey.OFFSET_COMMIT:
        data["topics"] = [
            {"name": t.name, "partitions": [
                {"partition_index": p.partition_index, "error_code": code} for p in t.partitions
            ]}
            for t in body.topics
        ]
    elif key == ApiKey.OFFSET_FETCH and version < 2:
        data["topics"] = [
            {"name": t.name, "partitions": [_fetched(int(p), None, error)
                                            for p in t.partition_indexes]}
            for t in body.topics or ()
        ]
    elif key == ApiKey.LEAVE_GROUP and version >= 3:
        data["members"] = [
            {"member_id": m.member_id, "group_instance_id": m.group_instance_id,
             "error_code": code}
            for m in body.members
        ]
    elif key == ApiKey.DESCRIBE_GROUPS:
        from .coordinator import EMPTY_SUMMARY

        data["groups"] = [
            _described(str(g), error, _ERROR_MESSAGES.get(code), EMPTY_SUMMARY, None)
            for g in body.groups
        ]
    elif key == ApiKey.JOIN_GROUP and version >= 7:
        data["protocol_name"] = None
    elif key == ApiKey.JOIN_GROUP:
        data["protocol_name"] = ""
    return _respond(key, version, data)
