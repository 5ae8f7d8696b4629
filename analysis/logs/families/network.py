"""comm_error: the collective library or the network failed (NCCL, Gloo, UCX, libfabric/EFA, InfiniBand,
torch.distributed's store and watchdog). Checked after hard crashes: when one rank dies the others fail in NCCL,
and that is not the network's fault.

Sources:
- NCCL, ncclGetErrorString (src/init.cc): "unhandled cuda error", "unhandled system error", "internal error -
  please report this issue to the NCCL developers", "remote process exited or there was a network error",
  "timeout" (ncclTimeout); its debug output: `host:pid:tid [dev] file.cc:line NCCL WARN <message>` (a WARN in
  the "Call to X failed : <strerror>" / "Connect to ... failed" / "NET/IB : Got completion ... with error" forms is
  a failure; plugin-loading and fallback WARNs are not; `Cuda failure N 'message'` is NCCL's CUDACHECK, returned
  as ncclUnhandledCudaError, and its 'out of memory' case is judged as oom before), and the NCCLCHECK trace
  `NCCL INFO file.cc:123 -> 2` that follows a failing call back up the stack (the number is the ncclResult_t:
  1 cuda, 2 system, 3 internal, 6 remote, 7 in progress; 4/5 invalid argument/usage are a program's mistake, not
  the network).
- libibverbs ibv_wc_status_str: "transport retry counter exceeded", "RNR retry counter exceeded", "remote access
  error", "remote operation error", "remote invalid request error", "local protection error", "Work Request
  Flushed Error"; NCCL prints them with the IBV_WC_* names or these strings.
- UCX ucs_status_string (src/ucs/type/status.c) in UCX's `UCX  ERROR` log lines: "Endpoint timeout", "Connection
  reset by remote peer", "Destination is unreachable", "Input/output error", "Operation timed out", "Endpoint is
  not connected", "Operation rejected by remote peer", "Failed to connect some of the requested endpoints".
- aws-ofi-nccl (NET/OFI) over libfabric (EFA): "NET/OFI Request ... completed with error. RC: N. Error: ...",
  "Unable to read from fi_cq_readerr", "Unable to retrieve completion queue entries"; the EFA provider's
  "Unresponsive receiver (reachable by EFA device but handshake failed)".
- Gloo (gloo/transport/tcp/pair.cc) and torch.distributed (c10d): ProcessGroupNCCL's watchdog and heartbeat
  monitor, TCPStore and rendezvous timeouts (the needles of analysis.logs.patterns.COMM stay there); the
  watchdog's C++ exception, printed as its frames when the "Watchdog caught ..." line is not in the log
  (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp: WorkNCCL::checkTimeout throws a timeout, and
  ncclCommWatchdog re-raises an NCCL async error: "Exception raised from ncclCommWatchdog at ...").
"""

from __future__ import annotations

from analysis.logs.families import rows
from launcher.core.kinds import FailureKind

_COMM = "communication error"
_NCCL = "NCCL (ncclGetErrorString, src/init.cc)"
NETWORK = (
    rows(FailureKind.COMM_ERROR, _COMM, _NCCL,
         ("remote process exited or there was a network error",
          "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:2012, remote process exited or "
          "there was a network error, NCCL version 2.21.5"),
         ("unhandled system error", "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for "
                                    "details), NCCL version 2.18.1"),
         ("internal error - please report this issue to the NCCL developers",
          "RuntimeError: NCCL error: internal error - please report this issue to the NCCL developers"))
    + rows(FailureKind.COMM_ERROR, _COMM, "libibverbs ibv_wc_status_str",
           ("transport retry counter exceeded", "NET/IB : Got completion from peer 10.1.1.2<4312> with status="
                                                "transport retry counter exceeded(12) opcode=0 len=0"),
           ("RNR retry counter exceeded", "ibv_poll_cq: work completion status RNR retry counter exceeded"),
           ("remote access error", "NET/IB: completion error: remote access error (10)"),
           ("Work Request Flushed Error", "ibv_poll_cq returned Work Request Flushed Error for wr_id 17"))
    + rows(FailureKind.COMM_ERROR, _COMM, "UCX ucs_status_string (src/ucs/type/status.c)",
           ("UCX  ERROR", "[1717171717.123456] [node7:4242:0]   ucp_worker.c:1783 UCX  ERROR ep 0x7f3c: error "
                          "'Endpoint timeout' on rc_mlx5/mlx5_0:1 will not be handled since no error callback is "
                          "installed",
            r"(?i)timeout|timed out|reset|unreachable|Input/output error|not connected|rejected|Failed to connect|"
            r"error '|failed"),
           ("UCX ERROR", "UCX ERROR rc_mlx5_ep.c:432 Transport retry count exceeded on mlx5_0:1/IB",
            r"(?i)timeout|timed out|reset|unreachable|Input/output error|not connected|rejected|Failed to connect|"
            r"retry|failed|error '"))
    + rows(FailureKind.COMM_ERROR, _COMM, "aws-ofi-nccl (NET/OFI) and libfabric EFA provider",
           ("completed with error. RC:", "ofi_process_cq:196 NCCL WARN NET/OFI Request 0x7f1c completed with error. "
                                         "RC: 5. Error: 16 (NO_SPACE). Completed length: 0"),
           ("Unable to read from fi_cq_readerr", "NCCL WARN NET/OFI Unable to read from fi_cq_readerr. RC: -11. "
                                                 "Error: Resource temporarily unavailable"),
           ("Unable to retrieve completion queue entries", "NCCL WARN NET/OFI Unable to retrieve completion queue "
                                                           "entries. RC: -5, ERROR: Input/output error"),
           ("Unresponsive receiver", "Error: 4126 (Unresponsive receiver (reachable by EFA device but handshake "
                                     "failed))"))
    + rows(FailureKind.COMM_ERROR, _COMM, "Gloo transport and torch.distributed c10d",
           ("gloo", "RuntimeError: [/opt/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out "
                    "waiting 1800000ms for recv operation to complete",
            r"(?i)gloo[^\n]{0,200}(?:Timed out|timeout|Connection (?:closed|reset|refused)|Broken pipe|failed)"),
           ("Timed out waiting", "RuntimeError: Timed out waiting 1800000ms for send operation to complete",
            r"(?i)waiting \d+ ?ms for (?:send|recv)|for (?:send|recv|store|clients)"),
           ("TCPStore", "torch.distributed.DistNetworkError: TCPStore( rank=3 ) failed to connect to the server "
                        "10.0.0.1:29500: Connection refused",
            r"(?i)timed out|timeout|failed|refused|reset|broken pipe"),
           ("Heartbeat monitor timed out", "[rank5]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 5] Heartbeat monitor "
                                           "timed out! Process will be terminated after dumping debug info."),
           ("NCCL timeout", "[rank2]: RuntimeError: NCCL timeout in ProcessGroupNCCL::allreduce after 600 s"),
           ("dump signal due to a collective timeout", "[rank7]:[E1006 15:30:20.630185464 ProcessGroupNCCL.cpp:1772] "
                                                       "[PG ID 0 Rank 7] Received a dump signal due to a collective "
                                                       "timeout from rank 3 and we will try our best to dump the "
                                                       "debug info."))
    + rows(FailureKind.COMM_ERROR, _COMM, "NCCL src/enqueue.cc (no algorithm/protocol of those NCCL_ALGO / "
           "NCCL_PROTO allow, e.g. CollNet without its plugin, can run the collective)",
           ("no algorithm/protocol available", "n1:41367:41367 [1] enqueue.cc:422 NCCL WARN Error : no "
                                               "algorithm/protocol available"))
    + rows(FailureKind.COMM_ERROR, _COMM, "torch c10d ProcessGroupNCCL.cpp (the watchdog's exception frames)",
           ("Exception raised from ncclCommWatchdog", "Exception raised from ncclCommWatchdog at "
                                                      "../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1521 (most "
                                                      "recent call first):"),
           ("WorkNCCL::checkTimeout", "frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::"
                                      "chrono::duration<long, std::ratio<1l, 1000l> > >) + 0x1d2 (0x7f in "
                                      "libtorch.so)")))
# NCCL's WARN lines: a failure when the message is in a failure form (below), not a plugin or fallback notice.
NCCL_WARN_FAILURE = (
    r"(?:[Cc]all to \w{1,40} failed|[Cc]onnect(?:ion)? to [^\n]{0,120} failed|failed\s*:\s*[A-Z][a-z]|"
    r"[Gg]ot completion[^\n]{0,80}(?:error|status)|IBV_WC_|[Tt]imed? ?out|[Tt]imeout|refused|[Cc]onnection reset|"
    r"[Cc]onnection closed|Broken pipe|unreachable|[Aa]bort|remote (?:process|peer)|[Nn]etwork error|"
    r"ncclRemoteError|ncclSystemError|ncclInternalError|[Cc]uda failure)")
NCCL_WARN_BENIGN = (r"(?i)plugin|dlopen|shared object|failed to find|could not find|unable to find|"
                    r"falling back|fallback|ignored|deprecated|cuda driver version")
NCCL_TRACE_CODES = {1: "unhandled cuda error", 2: "unhandled system error", 3: "internal error",
                    6: "remote process exited or there was a network error", 7: "operation in progress"}
NCCL_WARN_EXAMPLES = (
    "n12:1423:1650 [3] misc/socket.cc:538 NCCL WARN Call to accept failed : Too many open files",
    "n12:1423:1650 [3] misc/socket.cc:421 NCCL WARN socketStartConnect: Connect to 10.2.3.4<41923> failed : "
    "Network is unreachable",
    "n12:1423:1650 [1] transport/net_ib.cc:1296 NCCL WARN NET/IB : Got completion from peer 10.2.3.5<52412> with "
    "status=12 opcode=0 len=0 vendor err 129 (Recv)",
)
NCCL_TRACE_EXAMPLE = "n12:1423:1650 [3] NCCL INFO transport/net_socket.cc:474 -> 2"
