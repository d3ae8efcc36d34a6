//! The files that keep durable filters between checkpoints, in the directory
//! `cuckoo/` of the data directory: their names, layout, writing and strict
//! reading. No pgrx; `sql::named::cut` decides when to write them.
//!
//! A filter generation `G` has a *chain* of files: one *base* (every unit of the
//! filter as it was at a checkpoint cut) and the *deltas* written at later cuts
//! (the units that changed since the file before). The filter as of the last
//! file is the base with each delta's units written over it in order; the last
//! file's stamp is the WAL position it covers. A file is never changed once it
//! has its name: it is written under a temporary name, synced, renamed and the
//! directory synced. So a file either exists whole or not at all, whatever a
//! crash or a concurrent backup copy sees; a file that does not read back with
//! its checksum is damaged, never half-written.
//!
//! Names: `<gen>.<stamp>.base`, `<gen>.<stamp>.delta` (16 hexadecimal digits
//! each), temporary files end in `.tmp`.
//!
//! Layout (little-endian): magic, version (u32), kind (u32: 1 base, 2 delta),
//! generation, stamp, the stamp of the file a delta extends (0 for a base), the
//! reload reason, whether the filter has contents (u8; a placeholder has none),
//! its metadata (as in WAL records), words per unit (u32), the unit count (u64),
//! an xxh3-64 checksum of the header so far (so that the filter a damaged file
//! belonged to can still be named), then per unit its index (u32) and its
//! words; finally an xxh3-64 checksum of everything before it.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use super::durable::UNIT_WORDS;
use super::record::{Meta, Reader, Writer, CHAIN_TABLE_BYTES, QUEUE_BYTES, QUEUE_FOLLOWS};

/// The directory, relative to the data directory.
pub const DIR: &str = "cuckoo";
const MAGIC: u64 = 0x4643_6f6f_6b63_7563; // "cuckooCF"
const VERSION: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Base = 1,
    Delta = 2,
}

/// A file's name, parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Name {
    pub gen: u64,
    pub stamp: u64,
    pub kind: Kind,
}

impl Name {
    pub fn file_name(&self) -> String {
        format!("{:016X}.{:016X}.{}", self.gen, self.stamp, if self.kind == Kind::Base { "base" } else { "delta" })
    }

    pub fn parse(s: &str) -> Option<Name> {
        let mut parts = s.split('.');
        let (g, st, k) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() || g.len() != 16 || st.len() != 16 {
            return None;
        }
        let kind = match k {
            "base" => Kind::Base,
            "delta" => Kind::Delta,
            _ => return None,
        };
        Some(Name { gen: u64::from_str_radix(g, 16).ok()?, stamp: u64::from_str_radix(st, 16).ok()?, kind })
    }
}

/// What a file says about its filter, besides the units.
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    pub name: Name,
    pub prev: u64,
    pub reason: u64,
    pub has_contents: bool,
    pub meta: Meta,
    pub units: u64,
}

fn header_bytes(h: &Header) -> Vec<u8> {
    let mut w = Writer(Vec::with_capacity(160));
    w.u64(MAGIC).u32(VERSION).u32(h.name.kind as u32).u64(h.name.gen).u64(h.name.stamp).u64(h.prev).u64(h.reason);
    w.u8(h.has_contents as u8).meta(&h.meta).u32(UNIT_WORDS as u32).u64(h.units);
    let sum = xxhash_rust::xxh3::xxh3_64(&w.0);
    w.u64(sum);
    w.0
}

/// Writes one file: the header, then each unit, then [`FileWriter::finish`]
/// makes it durable under its name. Dropped unfinished, it leaves a temporary
/// file that readers ignore and the next writer of the directory removes.
pub struct FileWriter {
    tmp: PathBuf,
    path: PathBuf,
    dir: PathBuf,
    out: BufWriter<File>,
    sum: xxhash_rust::xxh3::Xxh3,
    bytes: u64,
    units_declared: u64,
    units_written: u64,
}

impl FileWriter {
    /// Starts file `h.name` in `dir` (created if missing) holding `h.units` units.
    pub fn create(dir: &Path, h: &Header) -> std::io::Result<FileWriter> {
        ensure_dir(dir)?;
        let path = dir.join(h.name.file_name());
        let tmp = dir.join(format!("{}.tmp", h.name.file_name()));
        let out = BufWriter::with_capacity(1 << 20, File::create(&tmp)?);
        let mut w = FileWriter {
            tmp,
            path,
            dir: dir.to_path_buf(),
            out,
            sum: xxhash_rust::xxh3::Xxh3::new(),
            bytes: 0,
            units_declared: h.units,
            units_written: 0,
        };
        w.put(&header_bytes(h))?;
        Ok(w)
    }

    fn put(&mut self, b: &[u8]) -> std::io::Result<()> {
        self.sum.update(b);
        self.bytes += b.len() as u64;
        self.out.write_all(b)
    }

    /// Appends unit `index` (`UNIT_WORDS` words).
    pub fn unit(&mut self, index: u32, words: &[u64]) -> std::io::Result<()> {
        debug_assert_eq!(words.len() as u64, UNIT_WORDS);
        let mut buf = Vec::with_capacity(4 + 8 * words.len());
        buf.extend_from_slice(&index.to_le_bytes());
        for w in words {
            buf.extend_from_slice(&w.to_le_bytes());
        }
        self.units_written += 1;
        self.put(&buf)
    }

    /// Pushes what was written so far to the file (still under its temporary
    /// name).
    pub fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }

    /// Adds the checksum, syncs, renames into place and syncs the directory.
    /// Returns the file's size. An error after the rename (the directory could
    /// not be synced) is [`Finish::Named`]: the file may exist under its name,
    /// or may not after a crash.
    pub fn finish(mut self) -> Result<u64, Finish> {
        let before = |e: std::io::Error| Finish::Unnamed(e);
        if self.units_written != self.units_declared {
            return Err(before(std::io::Error::other(format!(
                "{} units written, {} declared",
                self.units_written, self.units_declared
            ))));
        }
        let sum = self.sum.digest().to_le_bytes();
        self.out.write_all(&sum).map_err(before)?;
        let bytes = self.bytes + 8;
        let f = self.out.into_inner().map_err(|e| before(e.into_error()))?;
        f.sync_all().map_err(before)?;
        drop(f);
        std::fs::rename(&self.tmp, &self.path).map_err(before)?;
        File::open(&self.dir).and_then(|d| d.sync_all()).map_err(Finish::Named)?;
        Ok(bytes)
    }
}

/// Why [`FileWriter::finish`] failed.
#[derive(Debug)]
pub enum Finish {
    /// The file did not get its name.
    Unnamed(std::io::Error),
    /// It got its name, but the directory could not be synced.
    Named(std::io::Error),
}

impl std::fmt::Display for Finish {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Finish::Unnamed(e) => write!(f, "{e}"),
            Finish::Named(e) => write!(f, "could not sync the directory after naming the file: {e}"),
        }
    }
}

fn ensure_dir(dir: &Path) -> std::io::Result<()> {
    if !dir.is_dir() {
        std::fs::create_dir_all(dir)?;
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            File::open(parent)?.sync_all()?;
        } else {
            File::open(".")?.sync_all()?;
        }
    }
    Ok(())
}

/// Reads a file's header and checks its whole checksum (a pass over the file).
pub fn validate(path: &Path) -> Result<Header, String> {
    read_file(path, |_, _| {})
}

/// Reads only a file's header, checked by its own checksum: what filter a
/// file belongs to even when the rest of it is damaged.
pub fn read_header(path: &Path) -> Result<Header, String> {
    let f = File::open(path).map_err(|e| format!("cannot open: {e}"))?;
    let mut r = BufReader::with_capacity(4096, f);
    let mut sum = xxhash_rust::xxh3::Xxh3::new();
    parse_header(&mut r, &mut sum).map(|(h, _)| h)
}

/// Reads and checks the header (through its own checksum); returns it and its
/// length in bytes. `sum` has taken in every byte read.
fn parse_header(r: &mut impl Read, sum: &mut xxhash_rust::xxh3::Xxh3) -> Result<(Header, u64), String> {
    let mut read = |n: usize, sum: &mut xxhash_rust::xxh3::Xxh3| -> Result<Vec<u8>, String> {
        let mut b = vec![0u8; n];
        r.read_exact(&mut b).map_err(|_| "file is truncated".to_string())?;
        sum.update(&b);
        Ok(b)
    };
    // The fixed part, then the metadata (its name's length is in it).
    let mut all = read(5 * 8 + 2 * 4 + 1, sum)?;
    let meta_fixed = read(4 + 4 + 8 + 8 + 8 + 8 + 8 + 3 + 1, sum)?;
    // The name's length byte also says whether a key type (5 bytes) and a
    // chain (its fixed start, then its tables) follow it.
    let len_byte = *meta_fixed.last().unwrap();
    let (name_len, chain_len) = Meta::tail_len(len_byte);
    all.extend_from_slice(&meta_fixed);
    all.extend_from_slice(&read(name_len, sum)?);
    if chain_len > 0 {
        let fixed = read(chain_len, sum)?;
        // The count of tables also says whether queue counts follow them.
        let count = *fixed.last().unwrap();
        let tables = (count & !QUEUE_FOLLOWS) as usize;
        all.extend_from_slice(&fixed);
        all.extend_from_slice(&read(tables * CHAIN_TABLE_BYTES, sum)?);
        if count & QUEUE_FOLLOWS != 0 {
            all.extend_from_slice(&read(QUEUE_BYTES, sum)?);
        }
    }
    all.extend_from_slice(&read(4 + 8, sum)?);
    let own = read(8, sum)?;
    if xxhash_rust::xxh3::xxh3_64(&all) != u64::from_le_bytes(own[..].try_into().unwrap()) {
        return Err("header checksum mismatch (the file is damaged)".into());
    }
    let len = all.len() as u64 + 8;
    let mut rd = Reader { b: &all, what: "cuckoo file" };
    if rd.u64()? != MAGIC {
        return Err("not a cuckoo filter file".into());
    }
    let version = rd.u32()?;
    if version != VERSION {
        return Err(format!("file version {version} is not supported (expected {VERSION})"));
    }
    let kind = match rd.u32()? {
        1 => Kind::Base,
        2 => Kind::Delta,
        k => return Err(format!("unknown file kind {k}")),
    };
    let (gen, stamp, prev, reason) = (rd.u64()?, rd.u64()?, rd.u64()?, rd.u64()?);
    let has_contents = match rd.u8()? {
        0 => false,
        1 => true,
        b => return Err(format!("bad contents flag {b}")),
    };
    let meta = rd.meta()?;
    let unit_words = rd.u32()?;
    if unit_words as u64 != UNIT_WORDS {
        return Err(format!("file has {unit_words} words per unit, this build uses {UNIT_WORDS}"));
    }
    let units = rd.u64()?;
    rd.end()?;
    let name = Name { gen, stamp, kind };
    if kind == Kind::Delta && prev >= stamp || kind == Kind::Base && prev != 0 {
        return Err("file links to a later or missing predecessor".into());
    }
    Ok((Header { name, prev, reason, has_contents, meta, units }, len))
}

/// Reads a file, checking everything, and hands each unit to `unit` (index,
/// words). Units are handed over before the checksum is known to match: use
/// [`validate`] first when that matters.
pub fn read_file(path: &Path, mut unit: impl FnMut(u32, &[u64])) -> Result<Header, String> {
    let f = File::open(path).map_err(|e| format!("cannot open: {e}"))?;
    let len = f.metadata().map_err(|e| format!("cannot stat: {e}"))?.len();
    let mut r = BufReader::with_capacity(1 << 20, f);
    let mut sum = xxhash_rust::xxh3::Xxh3::new();
    let (header, header_len) = parse_header(&mut r, &mut sum)?;
    let Header { units, has_contents, ref meta, .. } = header;
    let mut read = |n: usize, sum: &mut xxhash_rust::xxh3::Xxh3| -> Result<Vec<u8>, String> {
        let mut b = vec![0u8; n];
        r.read_exact(&mut b).map_err(|_| "file is truncated".to_string())?;
        sum.update(&b);
        Ok(b)
    };
    let unit_count = meta.unit_count();
    let body = units
        .checked_mul(4 + 8 * UNIT_WORDS)
        .filter(|_| units <= unit_count)
        .ok_or_else(|| format!("file claims {units} units of a filter with {unit_count}"))?;
    if len != header_len + body + 8 {
        return Err(format!("file is {len} bytes, its header says {}", header_len + body + 8));
    }
    if !has_contents && units != 0 {
        return Err("file of a filter without contents holds units".into());
    }
    let mut words = vec![0u64; UNIT_WORDS as usize];
    let mut seen = vec![false; unit_count as usize];
    for _ in 0..units {
        let b = read(4 + 8 * UNIT_WORDS as usize, &mut sum)?;
        let index = u32::from_le_bytes(b[..4].try_into().unwrap());
        if index as u64 >= unit_count || std::mem::replace(&mut seen[index as usize], true) {
            return Err(format!("file holds unit {index} twice or out of range"));
        }
        for (w, c) in words.iter_mut().zip(b[4..].chunks_exact(8)) {
            *w = u64::from_le_bytes(c.try_into().unwrap());
        }
        unit(index, &words);
    }
    let mut trailer = [0u8; 8];
    r.read_exact(&mut trailer).map_err(|_| "file is truncated".to_string())?;
    if sum.digest() != u64::from_le_bytes(trailer) {
        return Err("checksum mismatch (the file is damaged)".into());
    }
    Ok(header)
}

/// The files in `dir`, by generation (in stamp order); temporary files are left
/// out, other names ignored.
pub fn list(dir: &Path) -> std::io::Result<std::collections::BTreeMap<u64, Vec<Name>>> {
    let mut out: std::collections::BTreeMap<u64, Vec<Name>> = Default::default();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e),
    };
    for e in entries {
        let e = e?;
        if let Some(n) = e.file_name().to_str().and_then(Name::parse) {
            out.entry(n.gen).or_default().push(n);
        }
    }
    for v in out.values_mut() {
        v.sort_by_key(|n| (n.stamp, n.kind));
    }
    Ok(out)
}

/// The coverage file: which WAL position the files of every durable filter
/// cover on this node (see `sql::named::cut`), written after each checkpoint
/// pass and at the end of recovery.
pub const COVERAGE: &str = "coverage";
const COVERAGE_MAGIC: u64 = 0x5643_6f6f_6b63_7563; // "cuckooCV"
const COVERAGE_VERSION: u32 = 1;

/// One live durable generation as the coverage file lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct CoverEntry {
    pub gen: u64,
    /// The stamp of its last file when the coverage was written (0: none).
    pub tip: u64,
    /// The tip a `PASS` record last listed for it (0: none): files this node
    /// wrote at a position no `PASS` confirmed (the end of recovery) are
    /// logged again by the next start's first pass.
    pub confirmed: u64,
    /// Why it needs a reload (0: it does not).
    pub reason: u64,
    pub meta: Meta,
}

/// What the coverage file says.
#[derive(Debug, Clone, PartialEq)]
pub struct Coverage {
    /// Every durable filter's files cover each change logged before this
    /// position (for a filter that changed since its last file, its changes
    /// before the position's pass began).
    pub stamp: u64,
    /// No durable change can follow `stamp` until the next start writes a new
    /// coverage (written before a shutdown checkpoint and at the end of
    /// recovery): the files cover any later restart position.
    pub frozen: bool,
    pub entries: Vec<CoverEntry>,
}

fn coverage_bytes(c: &Coverage) -> Vec<u8> {
    let mut w = Writer(Vec::with_capacity(64 + 128 * c.entries.len()));
    w.u64(COVERAGE_MAGIC).u32(COVERAGE_VERSION).u32(c.frozen as u32).u64(c.stamp).u32(c.entries.len() as u32);
    for e in &c.entries {
        w.u64(e.gen).u64(e.tip).u64(e.confirmed).u64(e.reason).meta(&e.meta);
    }
    let sum = xxhash_rust::xxh3::xxh3_64(&w.0);
    w.u64(sum);
    w.0
}

/// Writes the coverage file: under a temporary name, synced, renamed into
/// place, the directory synced (as [`FileWriter::finish`]).
pub fn write_coverage(dir: &Path, c: &Coverage) -> Result<(), Finish> {
    ensure_dir(dir).map_err(Finish::Unnamed)?;
    write_coverage_as(dir, COVERAGE, c)
}

/// Writes coverage `c` as file `name` of `dir` (temporary name, sync, rename,
/// directory sync).
pub fn write_coverage_as(dir: &Path, name: &str, c: &Coverage) -> Result<(), Finish> {
    let before = |e: std::io::Error| Finish::Unnamed(e);
    let tmp = dir.join(format!("{name}.tmp"));
    let mut f = File::create(&tmp).map_err(before)?;
    f.write_all(&coverage_bytes(c)).map_err(before)?;
    f.sync_all().map_err(before)?;
    drop(f);
    std::fs::rename(&tmp, dir.join(name)).map_err(before)?;
    File::open(dir).and_then(|d| d.sync_all()).map_err(Finish::Named)
}

/// Reads the coverage file: None if there is none (a directory written
/// before 0.10.0), an error if it does not read back whole.
pub fn read_coverage(dir: &Path) -> Result<Option<Coverage>, String> {
    read_coverage_as(dir, COVERAGE)
}

/// Reads file `name` of `dir` written by [`write_coverage_as`].
pub fn read_coverage_as(dir: &Path, name: &str) -> Result<Option<Coverage>, String> {
    let b = match std::fs::read(dir.join(name)) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read {name}: {e}")),
    };
    if b.len() < 8
        || xxhash_rust::xxh3::xxh3_64(&b[..b.len() - 8]) != u64::from_le_bytes(b[b.len() - 8..].try_into().unwrap())
    {
        return Err(format!("{name} is damaged (checksum mismatch)"));
    }
    let mut r = Reader { b: &b[..b.len() - 8], what: "coverage file" };
    if r.u64()? != COVERAGE_MAGIC {
        return Err(format!("{name} is not a cuckoo coverage file"));
    }
    let version = r.u32()?;
    if version != COVERAGE_VERSION {
        return Err(format!("{name} has version {version}, this build reads {COVERAGE_VERSION}"));
    }
    let frozen = match r.u32()? {
        0 => false,
        1 => true,
        f => return Err(format!("{name} has bad flags {f}")),
    };
    let stamp = r.u64()?;
    let n = r.u32()? as usize;
    let mut entries = Vec::with_capacity(n.min(1 << 16));
    for _ in 0..n {
        entries.push(CoverEntry {
            gen: r.u64()?,
            tip: r.u64()?,
            confirmed: r.u64()?,
            reason: r.u64()?,
            meta: r.meta()?,
        });
    }
    r.end()?;
    Ok(Some(Coverage { stamp, frozen, entries }))
}

/// Names in `dir` that are none of this module's: neither a filter's file,
/// a temporary file, nor the coverage file.
pub fn foreign(dir: &Path) -> std::io::Result<Vec<String>> {
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e),
    };
    for e in entries {
        let name = e?.file_name().to_string_lossy().into_owned();
        if Name::parse(&name).is_none() && !name.ends_with(".tmp") && name != COVERAGE {
            out.push(name);
        }
    }
    out.sort();
    Ok(out)
}

/// Removes the temporary files left by writes that never finished.
pub fn remove_temporary(dir: &Path) -> std::io::Result<usize> {
    let mut n = 0;
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries {
            let e = e?;
            if e.file_name().to_str().is_some_and(|s| s.ends_with(".tmp")) {
                std::fs::remove_file(e.path())?;
                n += 1;
            }
        }
    }
    Ok(n)
}

/// A generation's usable chain of files.
#[derive(Debug, Clone, PartialEq)]
pub struct Chain {
    /// The base, then the deltas, in order.
    pub files: Vec<Name>,
    /// The header of the last file: its stamp, metadata and reload reason.
    pub last: Header,
    /// Whether the chain holds contents (its base does; a placeholder's does
    /// not).
    pub has_contents: bool,
    pub base_bytes: u64,
    pub delta_bytes: u64,
    /// Newer files that no chain reaches (a backup copied some files of a cut
    /// made while it ran, but not the one before): the WAL from the backup's
    /// start covers what they would add.
    pub unreachable: usize,
}

/// The chain of generation `names[..].gen`: the newest base whose file reads
/// back whole, and each delta that extends it. A damaged file the chain would
/// have to pass through is an error (the filter cannot be restored from files).
pub fn chain(dir: &Path, names: &[Name]) -> Result<Chain, String> {
    let size = |n: &Name| std::fs::metadata(dir.join(n.file_name())).map(|m| m.len()).unwrap_or(0);
    let mut checked: Vec<(Name, Result<Header, String>)> = Vec::new();
    let mut check = |n: &Name| -> Result<Header, String> {
        if let Some((_, r)) = checked.iter().find(|(m, _)| m == n) {
            return r.clone();
        }
        let r = validate(&dir.join(n.file_name())).and_then(|h| {
            if h.name != *n {
                Err(format!("file {} says it is {}", n.file_name(), h.name.file_name()))
            } else {
                Ok(h)
            }
        });
        checked.push((*n, r.clone()));
        r
    };
    let base = names.iter().rev().find(|n| n.kind == Kind::Base).ok_or("no base file")?;
    let head = check(base).map_err(|e| format!("{}: {e}", base.file_name()))?;
    let has_contents = head.has_contents;
    let mut files = vec![*base];
    let mut last = head;
    let mut delta_bytes = 0;
    let later: Vec<&Name> = names.iter().filter(|n| n.stamp > base.stamp).collect();
    loop {
        // Deltas are named by their own stamp; the header says what they
        // extend, so the next one is one whose header links here. Two link to
        // the same file only when a cut failed after naming its file and the
        // next cut wrote everything since that same file again: the newer one
        // holds all of it.
        let next = later
            .iter()
            .rev()
            .find(|n| n.kind == Kind::Delta && { matches!(check(n), Ok(h) if h.prev == last.name.stamp) });
        match next {
            Some(n) => {
                let h = check(n).expect("checked");
                delta_bytes += size(n);
                files.push(**n);
                last = h;
            }
            None => break,
        }
    }
    // A damaged file newer than the chain's end may have been part of it.
    for n in later.iter().filter(|n| n.stamp > last.name.stamp) {
        if let Err(e) = check(n) {
            return Err(format!("{}: {e}", n.file_name()));
        }
    }
    let unreachable = later.iter().filter(|n| n.stamp > last.name.stamp).count();
    Ok(Chain { base_bytes: size(base), delta_bytes, files, last, has_contents, unreachable })
}

/// Writes a chain's contents into `words` (all its tables' words, table after
/// table as the last file's metadata lists them; zeroed first): the base, then
/// each delta over it. Checks every file again as it reads (they were
/// validated by [`chain`]); an error leaves `words` partly written. (Units
/// are numbered table after table, and a filter only gains tables, so an
/// older file's units are where the last file's metadata puts them.)
pub fn load(dir: &Path, chain: &Chain, words: &mut [u64]) -> Result<(), String> {
    words.fill(0);
    let meta = &chain.last.meta;
    for n in &chain.files {
        let mut outside = None;
        read_file(&dir.join(n.file_name()), |u, unit| match meta.unit_span(u as u64) {
            Some((_, at, len)) if at as usize + len <= words.len() => {
                words[at as usize..at as usize + len].copy_from_slice(&unit[..len])
            }
            _ => outside = Some(u),
        })
        .map_err(|e| format!("{}: {e}", n.file_name()))?;
        if let Some(u) = outside {
            return Err(format!("{}: unit {u} lies outside the filter's tables", n.file_name()));
        }
    }
    Ok(())
}

/// Removes generation `gen`'s files with a stamp below `before` (all of them
/// for `u64::MAX`), then syncs the directory. Returns how many went.
pub fn remove(dir: &Path, gen: u64, before: u64) -> std::io::Result<usize> {
    let mut n = 0;
    if let Some(names) = list(dir)?.get(&gen) {
        for name in names.iter().filter(|m| m.stamp < before) {
            match std::fs::remove_file(dir.join(name.file_name())) {
                Ok(()) => n += 1,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
    }
    if n > 0 {
        File::open(dir)?.sync_all()?;
    }
    Ok(n)
}

#[cfg(all(test, not(loom)))]
mod tests;
