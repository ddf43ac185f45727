"""Type stubs of tent: TENT's native Python API on this tree's runtime.
See docs/python.md."""
from typing import List, Optional, Sequence, Union

from typing_extensions import Buffer

# An address (int) or any C-contiguous object with the buffer protocol.
Memory = Union[int, Buffer]

LOCAL_SEGMENT_ID: int
kWildcardLocation: str
PRIO_HIGH: int
PRIO_MEDIUM: int
PRIO_LOW: int


class TentException(RuntimeError):
    code: str
    status_message: str
TentError = TentException
class InvalidArgumentError(TentException, ValueError): ...
class TooManyRequestsError(TentException): ...
class AddressNotRegisteredError(TentException): ...
class DeviceNotFoundError(TentException): ...
class InvalidEntryError(TentException): ...
class InvalidMetadataTypeError(TentException): ...
class NeedsRefreshCacheError(TentException): ...
class RdmaError(TentException): ...
class MetadataError(TentException): ...
class RpcServiceError(TentException): ...
class MalformedJsonError(TentException): ...
class InternalError(TentException): ...
class NotImplementedError(TentException, NotImplementedError): ...


class OpCode:
    READ: "OpCode"
    WRITE: "OpCode"
READ: OpCode
WRITE: OpCode


class TransferStatusEnum:
    INITIAL: "TransferStatusEnum"
    PENDING: "TransferStatusEnum"
    INVALID: "TransferStatusEnum"
    CANCELED: "TransferStatusEnum"
    COMPLETED: "TransferStatusEnum"
    TIMEOUT: "TransferStatusEnum"
    FAILED: "TransferStatusEnum"


class Permission:
    LocalReadWrite: "Permission"
    GlobalReadOnly: "Permission"
    GlobalReadWrite: "Permission"


class TransportType:
    UNSPEC: "TransportType"
    RDMA: "TransportType"
    MNNVL: "TransportType"
    SHM: "TransportType"
    NVLINK: "TransportType"
    GDS: "TransportType"
    IOURING: "TransportType"
    TCP: "TransportType"
    AscendDirect: "TransportType"
    SUNRISE_LINK: "TransportType"
    TPU: "TransportType"
    UB: "TransportType"
    MPCOMM: "TransportType"


class IntentType:
    INTENT_UNSPEC: "IntentType"
    FOREGROUND_GET: "IntentType"
    BACKGROUND_PREFETCH: "IntentType"
    MIGRATION: "IntentType"
    CHECKPOINT: "IntentType"
    WEIGHT_LOADING: "IntentType"
    STAGING_INTERNAL: "IntentType"


class SegmentInfoType:
    Memory: "SegmentInfoType"
    File: "SegmentInfoType"


class Notification:
    name: str
    msg: str
    def __init__(self, name: str = ..., msg: str = ...) -> None: ...


class Request:
    opcode: OpCode
    source: int
    target_id: int
    target_offset: int
    length: int
    priority: int
    transport_hint: TransportType
    policy_name: Optional[str]
    deadline_ns: int
    intent_type: IntentType
    def __init__(self, opcode: OpCode = ..., source: Memory = ...,
                 target_id: int = ..., target_offset: int = ...,
                 length: int = ..., priority: int = ...,
                 transport_hint: TransportType = ...,
                 policy_name: Optional[str] = None, deadline_ns: int = 0,
                 intent_type: IntentType = ...) -> None: ...


class TransferStatus:
    state: TransferStatusEnum
    bytes: int


class SegmentInfoBuffer:
    base: int
    length: int
    location: str


class SegmentInfo:
    type: SegmentInfoType
    buffers: List[SegmentInfoBuffer]


class MemoryOptions:
    location: str
    perm: Permission
    type: TransportType
    internal: bool


class MemoryGuard:
    def address(self) -> int: ...
    def size(self) -> int: ...
    def __enter__(self) -> int: ...
    def __exit__(self, *args: object) -> None: ...


class BatchGuard:
    def id(self) -> int: ...
    def release(self) -> None: ...
    def __enter__(self) -> int: ...
    def __exit__(self, *args: object) -> None: ...


class TransferEngine:
    def __init__(self, config_path: str = ...) -> None: ...
    def available(self) -> bool: ...
    def get_segment_name(self) -> str: ...
    def get_rpc_server_address(self) -> str: ...
    def get_rpc_server_port(self) -> int: ...
    def get_local_topology(self) -> str: ...
    def get_supported_transports(self) -> List[str]: ...
    def export_local_segment(self) -> str: ...
    def import_remote_segment(self, shared_handle: str) -> int: ...
    def open_segment(self, segment_name: str) -> int: ...
    def close_segment(self, handle: int) -> None: ...
    def get_segment_info(self, handle: int) -> SegmentInfo: ...
    def allocate_local_memory(self, size: int,
                              location: str = "*") -> int: ...
    def allocate_local_memory_ex(self, size: int,
                                 options: MemoryOptions) -> int: ...
    def free_local_memory(self, addr: int) -> None: ...
    def allocate_memory_guard(self, size: int,
                              location: str = "*") -> MemoryGuard: ...
    def allocate_memory_guard_ex(self, size: int,
                                 options: MemoryOptions) -> MemoryGuard: ...
    def register_local_memory(self, addr: Memory, size: Optional[int] = None,
                              permission: Permission = ...) -> None: ...
    def unregister_local_memory(self, addr: Memory, size: int = 0) -> None: ...
    def register_local_memory_batch(self, addr_list: Sequence[int],
                                    size_list: Sequence[int],
                                    permission: Permission = ...) -> None: ...
    def unregister_local_memory_batch(
            self, addr_list: Sequence[int],
            size_list: Sequence[int] = ...) -> None: ...
    def register_local_memory_ex(self, addr: int, size: int,
                                 options: MemoryOptions) -> None: ...
    def register_local_memory_batch_ex(self, addr_list: Sequence[int],
                                       size_list: Sequence[int],
                                       options: MemoryOptions) -> None: ...
    def allocate_transfer_batch(self, batch_size: int) -> int: ...
    def free_transfer_batch(self, batch_id: int) -> None: ...
    def allocate_batch_guard(self, batch_size: int) -> BatchGuard: ...
    def submit_transfer(self, batch_id: int, request_list: List[Request],
                        notifi: Optional[Notification] = ...) -> None: ...
    def submit_transfer_notif(self, batch_id: int,
                              request_list: List[Request], name: str,
                              message: str) -> None: ...
    def cancel_transfer(self, batch_id: int, task_id: int) -> None: ...
    def send_notifi(self, target_id: int, notifi: Notification) -> None: ...
    def recv_notifi(self) -> List[Notification]: ...
    def get_transfer_status(self, batch_id: int,
                            task_id: int) -> TransferStatus: ...
    def get_transfer_status_list(self,
                                 batch_id: int) -> List[TransferStatus]: ...
    def get_transfer_status_overall(self, batch_id: int) -> TransferStatus: ...
