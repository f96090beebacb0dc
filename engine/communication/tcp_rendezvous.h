// How the processes of a job started without MPI find each other (engine/communication/tcp_process_group.h):
// rank 0 listens at the address the launcher names, every other rank opens two connections to
// it, and each connection proves that it belongs to the job before it counts.
//
// Note [what the rendezvous trusts]: nothing that connects, until it proves itself. Rank 0 sends
// every connection a fresh random challenge; the hello that answers (engine/communication/rendezvous_handshake.h)
// carries an HMAC-SHA-256, keyed with DPBENCH_RENDEZVOUS_TOKEN (empty when unset), over the
// challenge, the job's identity (the launcher's ids of the job: LaunchEnvironment::job_identity)
// and the hello's fields. A connection without that proof (a stranger, garbage, another job that
// shares the port, a hello replayed from another connection) is closed and counted, and never
// becomes a rank nor ends the job; rank 0 answers a proven hello with its own proof over the
// rank's nonce, so a rank knows it reached its own job's rank 0 (under srun, the one of several
// candidate ports that is its own). The secret never travels. Before a peer has proven itself
// only a few hundred bytes are read from it, within a short deadline, and rank 0 serves every
// connection at once, so neither idle connections nor huge announced lengths stall the real
// ranks. Once every rank is in, rank 0 stops listening: the port is free again. Without a token,
// anyone who can reach the port and guess the ids can still take a rank's place; the token is
// the real protection.
//
// A proven rank whose variables contradict the job (another world size, a rank taken, two ranks
// of one host with the same local rank) ends the job at once: rank 0 tells every rank that has
// joined, and each stops with the same line (ConfigError).
#pragma once

#include <string>
#include <vector>

#include "engine/communication/launch_environment.h"
#include "engine/communication/rendezvous_handshake.h"

namespace dpbench {

// The connections of a job that has met. Rank 0: one per rank (its own -1); the others: entry 0,
// their connection to rank 0. The caller owns the descriptors.
struct MetRanks {
  std::vector<int> data, control;
  std::vector<std::string> hostnames;
};

// Rank 0: listens, gathers every rank, hands each the job's hosts. RuntimeError when the job is
// not complete within `timeout_seconds`; ConfigError when a proven rank contradicts the job.
MetRanks gather_ranks(const LaunchEnvironment& launch, const std::string& my_host, double timeout_seconds);
// The other ranks: joins rank 0, retrying while it is not up yet.
MetRanks join_rank_zero(const LaunchEnvironment& launch, const std::string& my_host, double timeout_seconds);

}  // namespace dpbench
