// The interface of StrataSim's packet network on ns-3 (adapters/ns3/_packet_net.cpp implements it). It names no
// ns-3 type, so the worker binds to a compiled network by reading this header alone: cppyy need not parse ns-3's.
#pragma once
#include <cstdint>
#include <vector>

namespace stratasim_ns3 {

class Network {
  public:
    virtual ~Network() = default;
    // The least delay of a message (ps) and the links built.
    virtual int64_t LookaheadPs() const = 0;
    virtual uint32_t Links() const = 0;
    // Start sending message `id` of `bytes` at `atPs` (not before the simulator's now).
    virtual void Send(uint64_t id, uint32_t src, uint32_t dst, uint64_t bytes, int64_t atPs) = 0;
    // From `atPs` on, the directed link of dimension d from node `from` to node `to` (-1: the switch of the other
    // end's line) runs at `bps` (kind 0), fails (kind 1: carries nothing new; what is queued at it drains) or comes
    // back (kind 2; at `bps` when not 0, else at the rate it had). Changes at one time apply in the order given.
    virtual void Change(int64_t atPs, uint32_t d, int64_t from, int64_t to, int kind, uint64_t bps) = 0;
    // Where the run stopped because a packet found no way: (time ps, the NPU it was at — at a switch, the one its
    // leg started at —, its message's destination, dimension, then the failed links in its way as (from, to) pairs,
    // -1 for a switch), or nothing.
    virtual std::vector<int64_t> Stuck() const = 0;
    // Run every event up to and including `untilPs`.
    virtual void RunUntil(int64_t untilPs) = 0;
    // Time of the next event the network holds, or -1 when it holds none.
    virtual int64_t NextEventPs() const = 0;
    // Deliveries decided since the last call, as (time ps, message id) pairs flattened (ids as int64: two's
    // complement beyond 2^63).
    virtual std::vector<int64_t> TakeDeliveries() = 0;
    // What each directed link carried, flattened: (dimension, from node, to node, busy ps, payload bytes, messages)
    // for every link that carried anything. Nodes from the NPU count on are switches.
    virtual std::vector<int64_t> Counters() const = 0;
};

// ns-3's time resolution set to picoseconds, then the network of the given dimensions built. kinds: 1 ring, 2 fully
// connected, 3 switch (network.proto's Dimension.Kind); bps: bits per second. The caller owns the result. (Every
// list is of int64_t, the type results come in, so cppyy instantiates one vector type, not four: 0.1-0.2 s each.)
Network* Build(const std::vector<int64_t>& kinds, const std::vector<int64_t>& sizes, const std::vector<int64_t>& bps,
               const std::vector<int64_t>& latencyPs, uint32_t mtu, uint32_t header, uint32_t window);

}  // namespace stratasim_ns3
