// StrataSim's packet network on ns-3, behind the interface of _packet_net.h (compiled once into a cached library,
// or by cppyy where that cannot be: see adapters/ns3/_build.py).
// NPUs and switches are ns-3 nodes joined by point-to-point links; a message is a train of MTU-sized packets per
// dimension it crosses, each packet forwarded store-and-forward, hop by hop, by the receive callbacks below.
// Links change speed, fail and come back at scheduled times (Change): a packet is forwarded the shorter way round a
// ring unless that way crosses a failed link, then the other way; where no way is left the run stops (Stuck).
#include "_packet_net.h"
#include "ns3/core-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include <algorithm>
#include <cstdint>
#include <queue>
#include <unordered_map>
#include <vector>

namespace stratasim_ns3 {
using namespace ns3;

class PacketNet : public Network {
  public:
    PacketNet(std::vector<int> kinds, std::vector<uint32_t> sizes, std::vector<uint64_t> bps,
              std::vector<int64_t> latencyPs, uint32_t mtu, uint32_t header, uint32_t window)
        : m_kinds(kinds), m_sizes(sizes), m_mtu(mtu), m_header(header), m_window(window) {
        uint32_t npus = 1;
        for (uint32_t s : sizes) { m_strides.push_back(npus); npus *= s; }
        m_npus = npus;
        m_nodes.Create(npus);
        m_ports.assign(npus, {});
        m_lookaheadPs = INT64_MAX;
        for (size_t d = 0; d < sizes.size(); ++d) {
            if (sizes[d] > 1) { BuildDimension(d, bps[d], latencyPs[d]); }
        }
        if (m_lookaheadPs == INT64_MAX) { m_lookaheadPs = 1; }
    }

    int64_t LookaheadPs() const override { return m_lookaheadPs; }
    uint32_t Links() const override { return m_links; }

    void Send(uint64_t id, uint32_t src, uint32_t dst, uint64_t bytes, int64_t atPs) override {
        uint64_t index = m_nextMessage++;
        Message& m = m_messages[index];
        m.id = id;
        m.dst = dst;
        m.packets = bytes == 0 ? 1 : (bytes + m_mtu - 1) / m_mtu;
        m.lastPayload = bytes == 0 ? 0 : bytes - (m.packets - 1) * m_mtu;
        m.waypoints.push_back(src);
        uint32_t here = src;
        for (size_t d = 0; d < m_sizes.size(); ++d) {  // dimension order: one leg per dimension crossed
            uint32_t want = Coord(dst, d);
            if (Coord(here, d) != want) {
                here = here + (want - Coord(here, d)) * m_strides[d];
                m.waypoints.push_back(here);
                m.legDims.push_back(d);
            }
        }
        Simulator::Schedule(PicoSeconds(atPs) - Simulator::Now(), &PacketNet::StartLeg, this, index);
        m_pending.push(atPs);
    }

    void Change(int64_t atPs, uint32_t d, int64_t from, int64_t to, int kind, uint64_t bps) override {
        uint32_t node = from >= 0 ? static_cast<uint32_t>(from) : m_ports[to][PortOf(to, d, -1)].peer;
        uint32_t portIndex = PortOf(node, d, to);
        if (bps > 0 && to >= 0) {  // a link into an NPU: its least packet bounds the lookahead
            int64_t least = DataRate(bps).CalculateBytesTxTime(m_header + 2).GetPicoSeconds();
            m_lookaheadPs = std::min(m_lookaheadPs, std::max<int64_t>(least + m_ports[node][portIndex].delayPs, 1));
        }
        Simulator::Schedule(PicoSeconds(atPs) - Simulator::Now(), &PacketNet::ApplyChange, this, node, portIndex,
                            kind, bps);
    }

    std::vector<int64_t> Stuck() const override { return m_stuck; }

    void RunUntil(int64_t untilPs) override {
        int64_t now = Simulator::Now().GetPicoSeconds();
        if (untilPs <= now) { return; }
        Simulator::Stop(PicoSeconds(untilPs - now));
        Simulator::Run();
        while (!m_pending.empty() && m_pending.top() <= untilPs) { m_pending.pop(); }
    }

    int64_t NextEventPs() const override { return m_pending.empty() ? -1 : m_pending.top(); }

    std::vector<int64_t> TakeDeliveries() override {
        std::vector<int64_t> out;
        out.swap(m_deliveries);
        return out;
    }

    std::vector<int64_t> Counters() const override {
        std::vector<int64_t> out;
        for (uint32_t node = 0; node < m_ports.size(); ++node) {
            for (const Port& port : m_ports[node]) {
                if (port.messages == 0) { continue; }
                int64_t row[6] = {static_cast<int64_t>(port.dim), node, port.peer, port.busyPs,
                                  static_cast<int64_t>(port.bytes), static_cast<int64_t>(port.messages)};
                out.insert(out.end(), row, row + 6);
            }
        }
        return out;
    }

  private:
    struct Message {
        uint64_t id = 0;
        uint32_t dst = 0;
        uint64_t packets = 0;
        uint64_t lastPayload = 0;
        std::vector<uint32_t> waypoints;
        std::vector<size_t> legDims;
        size_t leg = 0;
        uint64_t injected = 0;    // packets of the current leg handed to the source NIC
        uint64_t arrived = 0;     // packets of the current leg at its end
        uint64_t finalHops = 0;   // packets of the last leg that started on their last link
    };

    struct InFlight {  // a packet on its way
        uint64_t message;
        uint64_t seq;       // its index in the message's leg
        bool left = false;  // it has started on a link
    };

    struct Port {
        Ptr<PointToPointNetDevice> device;
        uint32_t peer;  // node at the other end
        int64_t delayPs;
        DataRate rate;
        size_t dim;
        bool failed = false;
        int64_t busyPs = 0;
        uint64_t bytes = 0;     // payload, headers not included
        uint64_t messages = 0;  // messages whose first packet crossed
    };

    uint32_t Coord(uint32_t npu, size_t d) const { return (npu / m_strides[d]) % m_sizes[d]; }

    void Link(size_t d, uint32_t a, uint32_t b, uint64_t bps, int64_t latencyPs) {
        PointToPointHelper helper;
        helper.SetDeviceAttribute("DataRate", DataRateValue(DataRate(bps)));
        helper.SetDeviceAttribute("Mtu", UintegerValue(m_mtu + m_header));
        helper.SetChannelAttribute("Delay", TimeValue(PicoSeconds(latencyPs)));
        // Lossless, as an RDMA fabric with priority flow control: queues deep enough never to drop (what is
        // queued is bounded by the senders' windows).
        helper.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize", StringValue("4000000p"));
        NetDeviceContainer pair = helper.Install(m_nodes.Get(a), m_nodes.Get(b));
        uint32_t ends[2] = {a, b};
        for (int i = 0; i < 2; ++i) {
            Ptr<PointToPointNetDevice> dev = DynamicCast<PointToPointNetDevice>(pair.Get(i));
            uint32_t node = ends[i];
            uint32_t portIndex = m_ports[node].size();
            m_ports[node].push_back(Port{dev, ends[1 - i], latencyPs, DataRate(bps), d});
            dev->SetReceiveCallback(MakeBoundCallback(&PacketNet::Received, this, node));
            dev->TraceConnectWithoutContext(
                "PhyTxBegin", MakeBoundCallback(&PacketNet::TxBegin, this, node, portIndex));
            if (ends[1 - i] < m_npus) {  // a link into an NPU: its least packet bounds the lookahead
                int64_t least = DataRate(bps).CalculateBytesTxTime(m_header + 2).GetPicoSeconds() + latencyPs;
                m_lookaheadPs = std::min(m_lookaheadPs, std::max<int64_t>(least, 1));
            }
        }
        ++m_links;
    }

    // Ports of dimension d: ring [+1, -1]; fully connected one per coordinate (its own slot unused); switch [up].
    void BuildDimension(size_t d, uint64_t bps, int64_t latencyPs) {
        uint32_t size = m_sizes[d], stride = m_strides[d];
        for (uint32_t n = 0; n < m_npus; ++n) {
            uint32_t c = Coord(n, d), line = n - c * stride;
            if (m_kinds[d] == 1) {  // ring: link to the next NPU, once per pair (a ring of 2 has one link)
                if (size == 2 && c == 1) { continue; }
                Link(d, n, line + ((c + 1) % size) * stride, bps, latencyPs);
            } else if (m_kinds[d] == 2) {
                for (uint32_t o = c + 1; o < size; ++o) { Link(d, n, line + o * stride, bps, latencyPs); }
            } else if (c == 0) {  // switch: a node per line, linked to each NPU of the line
                Ptr<Node> sw = CreateObject<Node>();
                uint32_t id = m_ports.size();
                m_ports.push_back({});
                m_nodes.Add(sw);
                for (uint32_t o = 0; o < size; ++o) { Link(d, line + o * stride, id, bps, latencyPs); }
            }
        }
    }

    // The port of `node` of dimension d to node `peer` (any of d, for -1: a switch dimension's up-link).
    uint32_t PortOf(uint32_t node, size_t d, int64_t peer) const {
        for (uint32_t p = 0; p < m_ports[node].size(); ++p) {
            const Port& port = m_ports[node][p];
            if (port.dim == d && (peer < 0 || port.peer == peer)) { return p; }
        }
        NS_FATAL_ERROR("no such link");
        return 0;
    }

    // The port of `node` a packet heading for NPU `to` along dimension d leaves by; -1 when every way it has
    // crosses a failed link, those links then added to `blocked` as (from, to) pairs, -1 for a switch.
    int64_t PortTowards(uint32_t node, uint32_t to, size_t d, std::vector<int64_t>& blocked) const {
        if (m_kinds[d] == 1) {
            uint32_t size = m_sizes[d], here = Coord(node, d), forward = (Coord(to, d) + size - here) % size;
            int step = forward <= size - forward ? 1 : -1;
            if (m_failedPorts == 0 || Clear(node, to, d, step, nullptr)) { return RingPort(node, d, step); }
            if (size > 2 && Clear(node, to, d, -step, nullptr)) { return RingPort(node, d, -step); }
            Clear(node, to, d, step, &blocked);
            if (size > 2) { Clear(node, to, d, -step, &blocked); }
            return -1;
        }
        std::vector<std::pair<uint32_t, uint32_t>> way;  // (node, port): the direct link, or up and down a switch
        if (node >= m_npus) {  // a switch: its ports are its line's NPUs in coordinate order
            way.emplace_back(node, Coord(to, d));
        } else if (m_kinds[d] == 3) {
            uint32_t up = PortOf(node, d, -1);
            way = {{node, up}, {m_ports[node][up].peer, Coord(to, d)}};
        } else {
            way.emplace_back(node, PortOf(node, d, to));
        }
        bool clear = true;
        for (auto [at, p] : way) {
            if (m_ports[at][p].failed) {
                clear = false;
                Block(at, m_ports[at][p].peer, blocked);
            }
        }
        return clear ? int64_t(way[0].second) : int64_t(-1);
    }

    void Block(uint32_t from, uint32_t to, std::vector<int64_t>& blocked) const {
        blocked.push_back(from < m_npus ? int64_t(from) : -1);
        blocked.push_back(to < m_npus ? int64_t(to) : -1);
    }

    // The ring port of `node` in dimension d going `step` (+1 or -1) round.
    uint32_t RingPort(uint32_t node, size_t d, int step) const {
        uint32_t size = m_sizes[d], c = Coord(node, d);
        uint32_t next = node - c * m_strides[d] + ((c + size + step) % size) * m_strides[d];
        return PortOf(node, d, next);
    }

    // Whether the way from `node` to `to` going `step` round ring dimension d crosses no failed link; every failed
    // link of it is added to `blocked` when given.
    bool Clear(uint32_t node, uint32_t to, size_t d, int step, std::vector<int64_t>* blocked) const {
        bool clear = true;
        for (uint32_t here = node; here != to;) {
            const Port& port = m_ports[here][RingPort(here, d, step)];
            if (port.failed) {
                clear = false;
                if (blocked == nullptr) { return false; }
                Block(here, port.peer, *blocked);
            }
            here = port.peer;
        }
        return clear;
    }

    void ApplyChange(uint32_t node, uint32_t portIndex, int kind, uint64_t bps) {
        Port& port = m_ports[node][portIndex];
        if (kind == 1) {
            port.failed = true;
            ++m_failedPorts;
            return;
        }
        if (kind == 2) {
            port.failed = false;
            --m_failedPorts;
        }
        if (bps > 0) {
            port.rate = DataRate(bps);
            port.device->SetDataRate(port.rate);
        }
    }

    void StartLeg(uint64_t index) {
        Message& m = m_messages[index];
        m.injected = 0;
        m.arrived = 0;
        uint64_t first = std::min<uint64_t>(m_window, m.packets);
        while (m.injected < first) { Inject(index); }  // (sending one may already refill the window)
    }

    void Inject(uint64_t index) {
        Message& m = m_messages[index];
        uint32_t payload = m.injected + 1 == m.packets ? m.lastPayload : m_mtu;
        Ptr<Packet> packet = Create<Packet>(payload + m_header);
        m_packetOf[packet->GetUid()] = InFlight{index, m.injected};
        ++m.injected;
        uint32_t from = m.waypoints[m.leg];
        Forward(from, packet, m);
    }

    void Forward(uint32_t node, Ptr<Packet> packet, const Message& m) {
        uint32_t to = m.waypoints[m.leg + 1];
        std::vector<int64_t> blocked;
        int64_t p = PortTowards(node, to, m.legDims[m.leg], blocked);
        if (p < 0) {  // no way left: stop the run, saying where
            if (m_stuck.empty()) {
                m_stuck = {Simulator::Now().GetPicoSeconds(), node < m_npus ? node : m.waypoints[m.leg], m.dst,
                           static_cast<int64_t>(m.legDims[m.leg])};
                m_stuck.insert(m_stuck.end(), blocked.begin(), blocked.end());
            }
            Simulator::Stop();
            return;
        }
        const Port& port = m_ports[node][p];
        port.device->Send(packet, port.device->GetBroadcast(), 0x0800);
    }

    static void TxBegin(PacketNet* self, uint32_t node, uint32_t portIndex, Ptr<const Packet> packet) {
        self->OnTxBegin(node, portIndex, packet);
    }

    void OnTxBegin(uint32_t node, uint32_t portIndex, Ptr<const Packet> packet) {
        Port& port = m_ports[node][portIndex];
        int64_t now = Simulator::Now().GetPicoSeconds();
        int64_t tx = port.rate.CalculateBytesTxTime(packet->GetSize()).GetPicoSeconds();
        InFlight& flight = m_packetOf.at(packet->GetUid());
        uint64_t index = flight.message, seq = flight.seq;
        bool leaving = !flight.left;  // its first link: it leaves the source (a detour may bring it back there)
        flight.left = true;
        port.busyPs += tx;
        port.bytes += packet->GetSize() - 2 - m_header;  // less the PPP and transport headers
        port.messages += seq == 0 ? 1 : 0;
        m_pending.push(now + tx);                  // the link frees
        m_pending.push(now + tx + port.delayPs);   // the packet arrives
        Message& m = m_messages[index];
        if (leaving && m.injected < m.packets) {
            Inject(index);  // a packet left the source's window: the next one takes its place
        }
        if (m.leg + 2 == m.waypoints.size() && port.peer == m.dst && ++m.finalHops == m.packets) {
            m_deliveries.push_back(now + tx + port.delayPs);  // the last packet's arrival, known from here on
            m_deliveries.push_back(static_cast<int64_t>(m.id));
        }
    }

    static bool Received(PacketNet* self, uint32_t node, Ptr<NetDevice>, Ptr<const Packet> packet, uint16_t,
                         const Address&) {
        return self->OnReceive(node, packet);
    }

    bool OnReceive(uint32_t node, Ptr<const Packet> packet) {
        auto found = m_packetOf.find(packet->GetUid());
        uint64_t index = found->second.message;
        Message& m = m_messages[index];
        if (node != m.waypoints[m.leg + 1]) {
            Forward(node, packet->Copy(), m);
            return true;
        }
        m_packetOf.erase(found);
        if (++m.arrived < m.packets) { return true; }
        ++m.leg;
        if (m.leg + 1 < m.waypoints.size()) {
            StartLeg(index);  // the NPU between two dimensions has the whole message: it sends it on
        } else {
            m_messages.erase(index);
        }
        return true;
    }

    std::vector<int> m_kinds;
    std::vector<uint32_t> m_sizes, m_strides;
    uint32_t m_mtu, m_header, m_window, m_npus = 0, m_links = 0;
    int64_t m_lookaheadPs;
    NodeContainer m_nodes;
    std::vector<std::vector<Port>> m_ports;
    uint32_t m_failedPorts = 0;
    std::vector<int64_t> m_stuck;
    std::unordered_map<uint64_t, Message> m_messages;
    uint64_t m_nextMessage = 0;
    std::unordered_map<uint64_t, InFlight> m_packetOf;  // by packet uid
    std::priority_queue<int64_t, std::vector<int64_t>, std::greater<int64_t>> m_pending;
    std::vector<int64_t> m_deliveries;
};

Network* Build(const std::vector<int64_t>& kinds, const std::vector<int64_t>& sizes, const std::vector<int64_t>& bps,
               const std::vector<int64_t>& latencyPs, uint32_t mtu, uint32_t header, uint32_t window) {
    Time::SetResolution(Time::PS);
    return new PacketNet(std::vector<int>(kinds.begin(), kinds.end()),
                         std::vector<uint32_t>(sizes.begin(), sizes.end()),
                         std::vector<uint64_t>(bps.begin(), bps.end()), latencyPs, mtu, header, window);
}

}  // namespace stratasim_ns3
