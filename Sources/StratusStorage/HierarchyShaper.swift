import StratusModel

/// Keeps the records' places in hierarchies and hierarchical shares current through one operation
/// of a write (``RecordHierarchy``): the one place that decides which share a record belongs to.
///
/// Given the rows an operation writes (its record first, then the records deleted with it), it
/// - places a saved record in its parent's share (or its own, for a root or a share record);
/// - attaches a new hierarchical share to its root (`forRecord`), and detaches it when the share is
///   deleted; deleting a root deletes its share;
/// - carries every change of a record's share down to the records below it through `parent`,
///   stopping at records already placed right;
/// - refuses, as `ALREADY_SHARED`, a share whose root is in a share already, and any change that
///   would bring one share's root under another share.
///
/// Like ``RecordWriteExecutor`` it does no I/O: it asks for records and for the records whose
/// parent is a given record, and the executor passes its questions to the backend.
struct HierarchyShaper {
    /// What the shaper needs next, or what it decided.
    enum Step {
        /// Ask the backend this (``RecordWriteExecutor/Step/fetchRecords(_:)`` or
        /// ``RecordWriteExecutor/Step/findReferrers(target:action:)`` with action `NONE`).
        case ask(RecordWriteExecutor.Step)
        /// The operation's rows: `rows` as planned (the operation's record first) with their places
        /// set, then shares deleted with their roots; `reshaped` are records whose place alone
        /// changed, which keep their change tag.
        case done(rows: [StoredRecord], reshaped: [StoredRecord])
        /// The operation fails.
        case failed(RecordWriteFailure)
    }

    private enum Task {
        /// Places a saved record (index into `rows`) under its parent.
        case place(Int)
        /// Confirms that a record given a new parent in `share` reaches that share's root through
        /// its ancestors, from `ancestor` on (`steps` taken): a record moved below itself (a loop)
        /// belongs to no share.
        case climb(index: Int, share: String, ancestor: String, steps: Int)
        /// Makes `root` the root of `share`.
        case attach(root: String, share: String)
        /// Makes `root` a plain record again after its share `share` was deleted.
        case detach(root: String, share: String)
        /// Deletes the share of a deleted root.
        case dropShare(String)
        /// Carries the share of a record down to the records under it.
        case propagate(String)
    }

    private var rows: [StoredRecord]
    /// Records the transaction had read before this operation, by name.
    private let known: [String: StoredRecord]
    /// Records this shaper read, by name, as they were before this operation.
    private(set) var fetched: [String: StoredRecord] = [:]
    private var reshaped: [String: StoredRecord] = [:]
    private var reshapedOrder: [String] = []
    private var tasks: [Task] = []
    /// Names read and not found.
    private var missing: Set<String> = []
    /// The task waiting for an answer, the names it asked to read, and for `propagate`, the
    /// children found.
    private var waiting: (task: Task, asked: [String], children: [String]?)?
    private let context: WriteContext
    /// How many records this operation may still re-place (``WriteContext/maxReshapedRecordsPerRequest``
    /// less what the request's earlier operations re-placed).
    private let budget: Int

    /// A shaper for the rows of one operation; `known` holds the records the transaction has read.
    init(rows: [StoredRecord], known: [String: StoredRecord], context: WriteContext, budget: Int) {
        self.rows = rows
        self.known = known
        self.context = context
        self.budget = budget
        for (index, row) in rows.enumerated() {
            let previous = known[row.name].flatMap { $0.deleted ? nil : $0 }
            if row.deleted {
                if let share = previous?.rootShareName { tasks.append(.dropShare(share)) }
                if let root = previous?.shareState?.rootRecordName {
                    tasks.append(.detach(root: root, share: row.name))
                }
                if previous?.shareName != nil, previous?.shareState == nil { tasks.append(.propagate(row.name)) }
            } else if let state = row.shareState, let root = state.rootRecordName {
                setShare(of: index, to: row.name)
                if previous?.shareState?.rootRecordName != root { tasks.append(.attach(root: root, share: row.name)) }
            } else if row.shareState == nil {
                tasks.append(.place(index))
            }
        }
        tasks.reverse()
    }

    /// The first step.
    mutating func start() -> Step {
        run()
    }

    /// The next step, given the backend's answer.
    mutating func resume(_ answer: RecordWriteExecutor.Answer) -> Step {
        guard let (task, asked, children) = waiting else { preconditionFailure("HierarchyShaper: no question asked") }
        waiting = nil
        switch answer {
        case .records(let records):
            for name in asked {
                if let record = records[name] { fetched[name] = record } else { missing.insert(name) }
            }
            return perform(task, children: children) ?? run()
        case .names(let names):
            let sorted = Array(Set(names)).sorted()
            let unknown = sorted.filter { current($0) == nil && !missing.contains($0) }
            guard unknown.isEmpty else {
                waiting = (task, unknown, sorted)
                return .ask(.fetchRecords(unknown))
            }
            return perform(task, children: sorted) ?? run()
        default:
            preconditionFailure("HierarchyShaper: answer \(answer) does not fit the question asked")
        }
    }

    // MARK: Tasks

    private mutating func run() -> Step {
        while let task = tasks.popLast() {
            if let step = perform(task, children: nil) { return step }
        }
        return .done(rows: rows, reshaped: reshapedOrder.map { reshaped[$0]! })
    }

    /// Performs a task with what is known, or asks for what it lacks; `nil` when the task finished
    /// and the next one may run.
    private mutating func perform(_ task: Task, children: [String]?) -> Step? {
        switch task {
        case .place(let index):
            let record = rows[index]
            var share = record.rootShareName
            if share == nil, let parent = record.parentName, parent != record.name {
                guard let found = lookUp(parent) else { return ask(task, names: [parent]) }
                share = found.flatMap { $0.deleted ? nil : $0.shareName }
                let previousParent = before(record.name).flatMap { $0.deleted ? nil : $0.parentName }
                if let share, previousParent != parent {
                    tasks.append(.climb(index: index, share: share, ancestor: parent, steps: 0))
                    return nil
                }
            }
            settle(index, in: share)
        case .climb(let index, let share, let name, let steps):
            guard name != rows[index].name, steps < Self.maxDepth else {
                settle(index, in: nil)
                return nil
            }
            guard let found = lookUp(name) else { return ask(task, names: [name]) }
            guard let ancestor = found, !ancestor.deleted else {
                settle(index, in: nil)
                return nil
            }
            if ancestor.rootShareName == share {
                settle(index, in: share)
            } else if let up = ancestor.parentName, ancestor.rootShareName == nil {
                tasks.append(.climb(index: index, share: share, ancestor: up, steps: steps + 1))
            } else {
                settle(index, in: nil)
            }
        case .attach(let root, let share):
            guard let found = lookUp(root) else { return ask(task, names: [root]) }
            guard let record = found, !record.deleted else {
                return .failed(
                    RecordWriteFailure(
                        .badRequest, "share '\(share)': forRecord names record '\(root)', which does not exist in this zone"))
            }
            if let other = record.rootShareName ?? record.shareName, other != share {
                return .failed(
                    RecordWriteFailure(
                        .alreadyShared,
                        "record '\(root)' is already in share '\(other)'; a record belongs to at most one share"))
            }
            reshape(record, [RecordHierarchy.rootShareField: .string(share), RecordHierarchy.shareField: .string(share)])
            tasks.append(.propagate(root))
        case .detach(let root, let share):
            guard let found = lookUp(root) else { return ask(task, names: [root]) }
            if let record = found, !record.deleted, record.rootShareName == share {
                reshape(record, [RecordHierarchy.rootShareField: nil, RecordHierarchy.shareField: nil])
                tasks.append(.propagate(root))
            }
        case .dropShare(let share):
            guard let found = lookUp(share) else { return ask(task, names: [share]) }
            if let record = found, !record.deleted, rows.allSatisfy({ $0.name != share }) {
                rows.append(RecordWritePlanner.tombstone(of: record, context: context))
            }
        case .propagate(let name):
            guard let children else {
                waiting = (task, [], nil)
                return .ask(.findReferrers(target: name, action: .none))
            }
            return propagate(from: name, children: children)
        }
        return nil
    }

    /// Gives the records under `name` the share `name` passes down (none when it is deleted).
    private mutating func propagate(from name: String, children: [String]) -> Step? {
        guard let source = current(name) else { return nil }
        let share = source.deleted ? nil : source.shareName
        for child in children where child != name {
            // The operation's own rows were placed from their parents already.
            guard rows.allSatisfy({ $0.name != child }), let record = current(child), !record.deleted else { continue }
            if let heads = record.rootShareName {
                guard share == nil || share == heads else {
                    return .failed(
                        RecordWriteFailure(
                            .alreadyShared,
                            "record '\(child)' under '\(name)' is the root of share '\(heads)'; it cannot be placed "
                                + "in share '\(share!)' too"))
                }
                continue
            }
            guard record.shareName != share else { continue }
            reshape(record, [RecordHierarchy.shareField: share.map(FieldValue.string)])
            guard reshaped.count <= budget else {
                return .failed(
                    RecordWriteFailure(
                        .limitExceeded,
                        "this write would move more than \(context.maxReshapedRecordsPerRequest) records in or out of shares in one "
                            + "request; share or move a smaller part at a time"))
            }
            tasks.append(.propagate(child))
        }
        return nil
    }

    // MARK: Records

    /// The record as this operation leaves it so far: a row, a reshaped record, or as read.
    private func current(_ name: String) -> StoredRecord? {
        rows.last(where: { $0.name == name }) ?? reshaped[name] ?? before(name)
    }

    /// The record as it was before this operation, if it was read.
    private func before(_ name: String) -> StoredRecord? {
        fetched[name] ?? known[name]
    }

    /// `.some(record or nil)` when the record's state is known, `nil` when it must be read.
    private func lookUp(_ name: String) -> StoredRecord?? {
        if let record = current(name) { return .some(record) }
        return missing.contains(name) ? .some(nil) : nil
    }

    private mutating func ask(_ task: Task, names: [String]) -> Step {
        waiting = (task, names, nil)
        return .ask(.fetchRecords(names))
    }

    /// How many ancestors a record moved under a shared parent may have before its share's root: past
    /// that, it is taken to be in a loop.
    static let maxDepth = 1_000

    /// Places the record at `index` in `share`, and has the records below it follow when that changed.
    private mutating func settle(_ index: Int, in share: String?) {
        setShare(of: index, to: share)
        let record = rows[index]
        let previous = before(record.name).flatMap { $0.deleted ? nil : $0.shareName }
        if share != previous { tasks.append(.propagate(record.name)) }
    }

    private mutating func setShare(of index: Int, to share: String?) {
        guard rows[index].shareName != share else { return }
        rows[index] = rows[index].settingReserved([RecordHierarchy.shareField: share.map(FieldValue.string)])
    }

    private mutating func reshape(_ record: StoredRecord, _ values: [String: FieldValue?]) {
        if reshaped[record.name] == nil { reshapedOrder.append(record.name) }
        reshaped[record.name] = record.settingReserved(values)
    }
}
