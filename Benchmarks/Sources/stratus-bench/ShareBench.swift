import Foundation
import Stratus
import StratusModel
import StratusServer
import StratusSQLite
import StratusSync

/// What sharing costs: a participant's edit reaching the owner's device beside an edit reaching the
/// owner's other device, and a shared zone's change feed read by a participant beside the owner
/// reading it from their private database; same server, same zone, same run.
struct ShareBench {
    struct Round: Encodable {
        var participantToOwnerP50 = 0.0
        var participantToOwnerP99 = 0.0
        var ownDevicesP50 = 0.0
        var ownDevicesP99 = 0.0
        var sharedFeedRead = 0.0
        var privateFeedRead = 0.0
    }

    let durability: SQLiteStorage.Durability
    let progress: (String) -> Void

    func measureRound(trials: Int, records: Int) async throws -> Round {
        let bench = try await BenchServer.start(durability: durability)
        do {
            let round = try await measure(on: bench, trials: trials, records: records)
            try await bench.stop()
            return round
        } catch {
            try? await bench.stop()
            throw error
        }
    }

    private func measure(on bench: BenchServer, trials: Int, records: Int) async throws -> Round {
        var round = Round()
        let zoneID = RecordZone.ID(zoneName: "Shared")
        let owner = bench.container(device: "owner-phone")
        _ = try await owner.privateCloudDatabase.save(RecordZone(zoneID: zoneID))
        let participant = Container(
            identifier: bench.credentials.container, serverURL: URL(string: bench.server.baseURL)!,
            apiToken: bench.credentials.apiToken, configuration: Container.Configuration(deviceID: "participant"))
        let participantID = try await participant.signUp(username: "participant", password: "benchmark password")
        var share = Share(recordZoneID: zoneID)
        share.addParticipant(Share.Participant(lookupInfo: .init(userRecordID: participantID), permission: .readWrite))
        share = try await owner.privateCloudDatabase.save(share)
        let metadata = try await participant.shareMetadata(for: share.url!)
        try await participant.accept(metadata)
        let sharedZoneID = metadata.share.recordID.zoneID

        let phone = BenchDevice(container: owner)
        let laptop = BenchDevice(container: bench.container(device: "owner-laptop"))
        let guest = BenchDevice(container: participant)
        let phoneEngine = try SyncEngine(
            SyncEngine.Configuration(database: owner.privateCloudDatabase, stateSerialization: nil, delegate: phone))
        let laptopEngine = try SyncEngine(
            SyncEngine.Configuration(database: laptop.container.privateCloudDatabase, stateSerialization: nil, delegate: laptop))
        let guestEngine = try SyncEngine(
            SyncEngine.Configuration(database: participant.sharedCloudDatabase, stateSerialization: nil, delegate: guest))

        /// An edit from `device`'s engine, timed to the owner's laptop.
        func trip(_ name: String, from device: BenchDevice, engine: SyncEngine, zone: RecordZone.ID, value: Int)
            async throws -> Double?
        {
            let sent = Record.ID(recordName: name, zoneID: zone)
            let arrival = laptop.expect(Record.ID(recordName: name, zoneID: zoneID))
            device.set(sent, value: value)
            let start = ContinuousClock.now
            engine.state.add(pendingRecordZoneChanges: [.saveRecord(sent)])
            guard let arrived = await arrival.wait(timeout: .seconds(10)) else { return nil }
            return seconds(arrived - start)
        }

        progress("sharing: waiting for the engines to listen")
        for attempt in 0..<100 {
            let own = try await trip("warm-own-\(attempt)", from: phone, engine: phoneEngine, zone: zoneID, value: attempt)
            let shared = try await trip(
                "warm-shared-\(attempt)", from: guest, engine: guestEngine, zone: sharedZoneID, value: attempt)
            if own != nil, shared != nil { break }
        }
        progress("sharing: \(trials) edits from the participant and \(trials) from the owner's phone, alternating")
        var shared: [Double] = []
        var own: [Double] = []
        for trial in 0..<trials {
            guard
                let fromGuest = try await trip("shared-\(trial)", from: guest, engine: guestEngine, zone: sharedZoneID, value: trial),
                let fromPhone = try await trip("own-\(trial)", from: phone, engine: phoneEngine, zone: zoneID, value: trial)
            else { throw BenchError("edit \(trial) did not reach the owner's laptop within 10 s") }
            shared.append(fromGuest)
            own.append(fromPhone)
        }
        round.participantToOwnerP50 = percentile(shared, 0.5) * 1000
        round.participantToOwnerP99 = percentile(shared, 0.99) * 1000
        round.ownDevicesP50 = percentile(own, 0.5) * 1000
        round.ownDevicesP99 = percentile(own, 0.99) * 1000
        withExtendedLifetime((phoneEngine, laptopEngine, guestEngine)) {}

        progress("sharing: writing \(records) records into the shared zone")
        for start in stride(from: 0, to: records, by: 200) {
            let batch = (start..<min(start + 200, records)).map { index in
                var record = Record(recordType: "Item", recordID: Record.ID(recordName: "item-\(index)", zoneID: zoneID))
                record["value"] = Int64(index)
                record["title"] = "Item \(index)"
                return record
            }
            _ = try await owner.privateCloudDatabase.modifyRecords(saving: batch, deleting: [])
        }
        progress("sharing: reading the zone's feed as the owner and as the participant, alternating, 3 times each")
        func readAll(_ database: Database, _ zone: RecordZone.ID) async throws -> Double {
            var token: ServerChangeToken?
            var count = 0
            let start = ContinuousClock.now
            while true {
                let page = try await database.recordZoneChanges(inZoneWith: zone, since: token)
                count += page.modificationResultsByID.count
                token = page.changeToken
                if !page.moreComing { break }
            }
            return Double(count) / seconds(ContinuousClock.now - start)
        }
        var sharedRates: [Double] = []
        var privateRates: [Double] = []
        for _ in 0..<3 {
            privateRates.append(try await readAll(owner.privateCloudDatabase, zoneID))
            sharedRates.append(try await readAll(participant.sharedCloudDatabase, sharedZoneID))
        }
        round.sharedFeedRead = percentile(sharedRates, 0.5)
        round.privateFeedRead = percentile(privateRates, 0.5)
        return round
    }

    private func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
