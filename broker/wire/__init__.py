"""Sans-I/O Kafka wire protocol: frames in, decisions and encoded chunks out.  No sockets here.

Typical connection loop (in ``broker/runtime``)::

    decoder = FrameDecoder(max_frame_bytes=config.socket_request_max_bytes)
    for item in decoder.feed(data):
        if isinstance(item, FrameError):      # oversized / negative / garbage: close
            ...
        match decode_request(item.payload):
            case Request() as req:            # dispatch on req.api_key, req.body (kio entity)
                frame = encode_response(req.correlation_id, build(resp_cls, {...}))
            case Reply(frame=frame):          # e.g. ApiVersions above our maximum: send it
                ...
            case Close(reason=why):           # unknown key, unserved version, malformed: close
                ...

Fetch responses go through ``encode_fetch_response``, whose chunks mix bytes and
``FileRegion``s for ``os.sendfile``.
"""

from .api_versions import (
    api_versions_response,
    client_software_valid,
    unsupported_api_versions_frame,
)
from .apis import (
    API_TABLE,
    ApiKey,
    ApiSupport,
    ApiTable,
    request_header_version,
    response_header_version,
)
from .batch import (
    BATCH_HEADER_SIZE,
    BatchError,
    BatchHeader,
    BatchScan,
    parse_batch_header,
    scan_batches,
)
from .build import BuildError, build
from .chunks import Chunk, ChunkCollector, FileRegion, ResponseFrame, chunk_length
from .fetch import (
    AbortedTransaction,
    EpochEndOffset,
    FetchPartitionResponse,
    FetchResponseBody,
    FetchTopicResponse,
    LeaderIdAndEpoch,
    SnapshotId,
    encode_fetch_response,
)
from .framing import (
    DEFAULT_MAX_REQUEST_BYTES,
    Frame,
    FrameDecoder,
    FrameError,
    FrameErrorKind,
    check_frame_size,
    frame,
)
from .request import (
    Close,
    CloseCode,
    Reply,
    Request,
    RequestHeader,
    decode_request,
    encode_request,
    parse_request_header,
    request_class,
    request_fields,
)
from .response import (
    DecodedResponse,
    EncodeError,
    ResponseDecodeError,
    decode_response,
    encode_response,
    encode_response_frame,
    response_class,
    response_fields,
)

__all__ = [
    "API_TABLE",
    "BATCH_HEADER_SIZE",
    "DEFAULT_MAX_REQUEST_BYTES",
    "AbortedTransaction",
    "ApiKey",
    "ApiSupport",
    "ApiTable",
    "BatchError",
    "BatchHeader",
    "BatchScan",
    "BuildError",
    "Chunk",
    "ChunkCollector",
    "Close",
    "CloseCode",
    "DecodedResponse",
    "EncodeError",
    "EpochEndOffset",
    "FetchPartitionResponse",
    "FetchResponseBody",
    "FetchTopicResponse",
    "FileRegion",
    "Frame",
    "FrameDecoder",
    "FrameError",
    "FrameErrorKind",
    "LeaderIdAndEpoch",
    "Reply",
    "Request",
    "RequestHeader",
    "ResponseDecodeError",
    "ResponseFrame",
    "SnapshotId",
    "api_versions_response",
    "build",
    "check_frame_size",
    "chunk_length",
    "client_software_valid",
    "decode_request",
    "decode_response",
    "encode_fetch_response",
    "encode_request",
    "encode_response",
    "encode_response_frame",
    "frame",
    "parse_batch_header",
    "parse_request_header",
    "request_class",
    "request_fields",
    "request_header_version",
    "response_class",
    "response_fields",
    "response_header_version",
    "scan_batches",
    "unsupported_api_versions_frame",
]
