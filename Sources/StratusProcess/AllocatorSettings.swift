#if canImport(Glibc)
import Glibc
#endif

/// Settings of the C allocator for a process that moves pages of records: a Stratus server, or an
/// app on Linux that syncs large zones.
///
/// glibc's `malloc` serves a block above 128 KiB from a fresh memory mapping and returns a heap's
/// free top to the kernel soon after it is freed. A feed page (its body, its 200 decoded records)
/// and a batch of 1,000 fetched changes are such blocks, made and freed for every page, so the kernel
/// faulted in and zeroed their memory again each time: in a first sync of 400,000 records that was
/// 1.5 million page faults and a sixth of the process's CPU.
public enum AllocatorSettings {
    /// Blocks up to this size come from the heap rather than a mapping of their own.
    public static let largestHeapBlock = 4 << 20
    /// Free memory a heap keeps at its top for the next blocks before returning it.
    public static let keptFreeMemory = 32 << 20

    /// Keeps freed memory for reuse: blocks up to ``largestHeapBlock`` from the heap, up to
    /// ``keptFreeMemory`` kept at a heap's top. Call it once, first thing in `main`. It does
    /// nothing where the allocator is not glibc's, and leaves alone settings the environment made
    /// (`MALLOC_MMAP_THRESHOLD_`, `MALLOC_TRIM_THRESHOLD_`, `GLIBC_TUNABLES`).
    public static func keepFreedMemoryForReuse() {
        #if canImport(Glibc)
        let environment = ["MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES"]
        guard environment.allSatisfy({ getenv($0) == nil }), let mallopt = Self.mallopt else { return }
        _ = mallopt(Self.mmapThresholdParameter, Int32(largestHeapBlock))
        _ = mallopt(Self.trimThresholdParameter, Int32(keptFreeMemory))
        #endif
    }

    #if canImport(Glibc)
    /// glibc's `mallopt` and its parameters (`<malloc.h>`), which Swift's Glibc module does not export.
    private static let mallopt: (@convention(c) (Int32, Int32) -> Int32)? = dlsym(nil, "mallopt").map {
        unsafeBitCast($0, to: (@convention(c) (Int32, Int32) -> Int32).self)
    }
    private static let trimThresholdParameter: Int32 = -1
    private static let mmapThresholdParameter: Int32 = -3
    #endif
}
