//! Stage 1 under namespaces: the user, mount (and network) namespaces, and the command's new
//! root built on a tmpfs: the system directories read-only, the home allowlist, the private
//! `/tmp`, the workspace, the protected and masked paths, a minimal `/dev`, and the filtering
//! proxy's socket. [`crate::init`] then pivots into it.

#![expect(
    clippy::disallowed_methods,
    reason = "the helper is the layer that confines processes: it builds the command's root \
              from the host's files, outside Keel's runtime"
)]

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use nix::errno::Errno;
use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};
use nix::sys::stat::{Mode, SFlag, mknod};
use nix::sys::statvfs::{FsFlags, statvfs};
use nix::unistd::{chdir, mkdir};

use crate::error::{Error, Result};
use crate::keeper::Joined;
use crate::profile::{Profile, SYSTEM_DIRS};

pub(crate) fn write_file(path: &str, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(|e| Error::io_in(path, e))
}

/// Stage 1 set-up: the user, mount and network namespaces and the new root's file system.
/// Returns whether the filtering proxy's socket is in the new root (and the namespace's
/// loopback up, for the forwarder).
pub(crate) fn enter(profile: &Profile, (uid, gid): (u32, u32)) -> Result<bool> {
    // The staging directory is there from the session's previous commands, but for the first.
    match mkdir(&profile.staging_dir, DIR_MODE) {
        Ok(()) | Err(Errno::EEXIST) => {}
        Err(_) => std::fs::create_dir_all(&profile.staging_dir)
            .map_err(|e| Error::io(&profile.staging_dir, e))?,
    }
    // The session's keeper: its user namespace, and a network namespace of this command's own
    // made ahead (its loopback up). Without it, both are made here.
    let joined = match (&profile.keeper, profile.network) {
        (Some(socket), false) => crate::keeper::join(socket),
        _ => Joined::Nothing,
    };
    // An IPC namespace of the command's own: System V IPC and POSIX message queues are looked
    // up by key or id, not by path, and the user's other processes' would be reachable.
    let mut flags = CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_NEWIPC;
    if joined == Joined::Nothing {
        flags |= CloneFlags::CLONE_NEWUSER;
    }
    if !profile.network && joined != Joined::Both {
        flags |= CloneFlags::CLONE_NEWNET;
    }
    unshare(flags).map_err(|e| Error::sys("unshare", e))?;
    if joined == Joined::Nothing {
        map_to_root((uid, gid))?;
    }
    let mut proxy = false;
    if !profile.network {
        // The new network namespace's own loopback (not the host's): test servers inside the
        // command work; nothing outside is reachable. Optional (without it, no proxy either).
        // The keeper's namespaces have theirs up already.
        proxy = (joined == Joined::Both || loopback_up().is_ok()) && profile.proxy.is_some();
    }
    make_private()?;
    let mut root = build_root(profile)?;
    if let (true, Some(endpoint)) = (proxy, &profile.proxy) {
        proxy = bind_socket(&mut root, &endpoint.socket).is_ok();
    }
    Ok(proxy)
}

/// Maps the caller (`uid`, `gid` outside) to root in the user namespace it just made.
fn map_to_root((uid, gid): (u32, u32)) -> Result<()> {
    write_file("/proc/self/setgroups", "deny")?;
    write_file("/proc/self/uid_map", &format!("0 {uid} 1"))?;
    write_file("/proc/self/gid_map", &format!("0 {gid} 1"))
}

/// Makes every mount of the new mount namespace private: nothing mounted here reaches the
/// host, nothing the host mounts from now on reaches here.
fn make_private() -> Result<()> {
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| Error::sys("making / private", e))
}

/// The warm holder's root under namespaces (`zygote`, decision 0048): the per-profile part of
/// [`enter`] and of init's pivot, done once. A user namespace of the holder's own (the caller
/// mapped to root), a mount namespace with the profile's new root built, a network namespace of
/// its own with only its loopback (the session's contained commands share it),
/// the host's `/proc` bound at `/proc` (a command's init mounts the `/proc` of its own PID
/// namespace over it: the kernel mounts a `/proc` only where one is fully visible already),
/// the old root detached and the new root read-only.
pub(crate) fn hold_root(profile: &Profile, ids: (u32, u32)) -> Result<()> {
    match mkdir(&profile.staging_dir, DIR_MODE) {
        Ok(()) | Err(Errno::EEXIST) => {}
        Err(e) => return Err(Error::sys("the staging directory", e)),
    }
    let flags = CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_NEWNET;
    unshare(flags).map_err(|e| Error::sys("unshare", e))?;
    map_to_root(ids)?;
    // Optional, as for a command of its own: without it a test server inside has no loopback.
    let _ = loopback_up();
    make_private()?;
    build_root(profile)?;
    mount(
        Some("/proc"),
        "proc",
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
    .map_err(|e| Error::sys("binding the host's /proc", e))?;
    crate::init::pivot_into_cwd()
}

/// Shows the proxy's Unix socket at [`crate::SOCKET_IN_ROOT`] in the new root (a bind mount of
/// the socket).
fn bind_socket(root: &mut Root<'_>, socket: &Path) -> Result<()> {
    let target = in_root(Path::new(crate::SOCKET_IN_ROOT));
    root.file(target)
        .map_err(|e| Error::sys("the proxy's socket", e))?;
    mount(
        Some(socket),
        target,
        None::<&str>,
        MsFlags::MS_BIND,
        None::<&str>,
    )
    .map_err(|e| Error::sys(format!("binding {}", socket.display()), e))
}

/// Sets `lo` (interface 1 in a new network namespace) up with one `RTM_NEWLINK` netlink request.
pub(crate) fn loopback_up() -> Result<(), Errno> {
    use nix::sys::socket::{
        AddressFamily, MsgFlags, SockFlag, SockProtocol, SockType, recv, send, socket,
    };
    use std::os::fd::AsRawFd as _;
    const RTM_NEWLINK: u16 = 16;
    const NLM_F_REQUEST: u16 = 1;
    const NLM_F_ACK: u16 = 4;
    const IFF_UP: u32 = 1;
    let fd = socket(
        AddressFamily::Netlink,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkRoute,
    )?;
    let mut message = Vec::with_capacity(32);
    message.extend_from_slice(&32u32.to_ne_bytes()); // nlmsg_len
    message.extend_from_slice(&RTM_NEWLINK.to_ne_bytes()); // nlmsg_type
    message.extend_from_slice(&(NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes()); // nlmsg_flags
    message.extend_from_slice(&1u32.to_ne_bytes()); // nlmsg_seq
    message.extend_from_slice(&0u32.to_ne_bytes()); // nlmsg_pid
    message.extend_from_slice(&[0u8, 0u8]); // ifi_family (AF_UNSPEC), padding
    message.extend_from_slice(&0u16.to_ne_bytes()); // ifi_type
    message.extend_from_slice(&1i32.to_ne_bytes()); // ifi_index: lo
    message.extend_from_slice(&IFF_UP.to_ne_bytes()); // ifi_flags
    message.extend_from_slice(&IFF_UP.to_ne_bytes()); // ifi_change
    send(fd.as_raw_fd(), &message, MsgFlags::empty())?;
    // The acknowledgement: an NLMSG_ERROR whose error field is 0 on success.
    let mut reply = [0u8; 64];
    let n = recv(fd.as_raw_fd(), &mut reply, MsgFlags::empty())?;
    let code = reply
        .get(16..20)
        .filter(|_| n >= 20)
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map(i32::from_ne_bytes)
        .unwrap_or(-1);
    if code == 0 {
        Ok(())
    } else {
        Err(Errno::from_raw(-code))
    }
}

/// `path` (absolute, on the host) as a path relative to the new root's top, which is the
/// working directory while the root is built (`.` for `/` itself).
fn in_root(path: &Path) -> &Path {
    match path.strip_prefix("/") {
        Ok(rest) if !rest.as_os_str().is_empty() => rest,
        Ok(_) => Path::new("."),
        Err(_) => path,
    }
}

/// The new root while it is built. The working directory is its top (the tmpfs on the staging
/// directory), so each mount point is named by a short relative path, and `dirs` holds the
/// directories of the root known to exist (made here, or mount points): a mount point is made
/// with one `mkdir` per missing directory, and nothing is looked up first (`EEXIST` is the
/// answer where a directory may exist already: below a bind mount of a host directory).
struct Root<'a> {
    /// The staging directory (absolute).
    path: &'a Path,
    /// Relative paths of directories known to exist in the new root.
    dirs: Vec<PathBuf>,
    mounts: Mounts,
}

/// `mkdir`'s and `mknod`'s mode for mount points (the umask applies, as for `create_dir_all`
/// and `File::create`, which made them before).
const DIR_MODE: Mode = Mode::from_bits_truncate(0o777);
const FILE_MODE: Mode = Mode::from_bits_truncate(0o666);

impl Root<'_> {
    /// Makes the directory `dir` (relative) and those above it that are not known to exist.
    fn dir(&mut self, dir: &Path) -> Result<(), Errno> {
        let known = |dirs: &[PathBuf], path: &Path| {
            path.as_os_str().is_empty() || path == Path::new(".") || dirs.iter().any(|d| d == path)
        };
        if known(&self.dirs, dir) {
            return Ok(());
        }
        // The nearest known ancestor; every directory below it is made from the top down (one
        // call each: once one is new, those below it are missing for certain).
        let missing: Vec<&Path> = dir
            .ancestors()
            .take_while(|path| !known(&self.dirs, path))
            .collect();
        for path in missing.into_iter().rev() {
            match mkdir(path, DIR_MODE) {
                Ok(()) | Err(Errno::EEXIST) => self.dirs.push(path.to_path_buf()),
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Makes the empty file `file` (relative) to bind a file onto, and its directory; an
    /// existing file is left as it is (`mknod` neither opens nor truncates it).
    fn file(&mut self, file: &Path) -> Result<(), Errno> {
        if let Some(parent) = file.parent() {
            self.dir(parent)?;
        }
        match mknod(file, SFlag::S_IFREG, FILE_MODE, 0) {
            Ok(()) | Err(Errno::EEXIST) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Records a mount on `target` (relative): what was known below it is hidden now.
    fn mounted(&mut self, target: &Path) -> Result<()> {
        if target == Path::new(".") {
            // The top itself: the working directory still holds the covered one.
            self.dirs.clear();
            return chdir(self.path).map_err(|e| Error::sys("chdir to the new root", e));
        }
        self.dirs
            .retain(|dir| dir == target || !dir.starts_with(target));
        Ok(())
    }

    /// Shows the host's `source` at the same path in the new root (one look at `source`: a
    /// directory or a file, whose mount point is made to match).
    fn bind(&mut self, source: &Path, read_only: bool) -> Result<()> {
        let what = || format!("binding {}", source.display());
        let meta = std::fs::metadata(source).map_err(|e| Error::io_in(what(), e))?;
        self.bind_at(source, in_root(source), meta.is_dir(), read_only)
    }

    /// [`Root::bind`] of a path that may be missing (the home allowlist): left out then.
    fn bind_if_there(&mut self, source: &Path, read_only: bool) -> Result<()> {
        match std::fs::metadata(source) {
            Ok(meta) => self.bind_at(source, in_root(source), meta.is_dir(), read_only),
            Err(_) => Ok(()),
        }
    }

    fn bind_at(&mut self, source: &Path, target: &Path, dir: bool, read_only: bool) -> Result<()> {
        let what = || format!("binding {}", source.display());
        if dir {
            self.dir(target)
        } else {
            self.file(target)
        }
        .map_err(|e| Error::sys(what(), e))?;
        mount(
            Some(source),
            target,
            None::<&str>,
            MsFlags::MS_BIND | MsFlags::MS_REC,
            None::<&str>,
        )
        .map_err(|e| Error::sys(what(), e))?;
        self.mounted(target)?;
        if read_only {
            self.read_only(target, source)?;
        }
        Ok(())
    }

    /// Makes the mount on `target` (relative) and every mount below it read-only.
    fn read_only(&self, target: &Path, source: &Path) -> Result<()> {
        match set_read_only_recursive(target) {
            Ok(()) => Ok(()),
            Err(Errno::ENOSYS) => remount_read_only(&self.path.join(target), source, &self.mounts),
            Err(e) => Err(Error::sys(
                format!("remounting {} read-only", self.path.join(target).display()),
                e,
            )),
        }
    }
}

/// Builds the new root on a tmpfs on the staging directory, which becomes the working
/// directory; returns it, for the proxy's socket.
fn build_root(profile: &Profile) -> Result<Root<'_>> {
    let staging = profile.staging_dir.as_path();
    mount(
        Some("tmpfs"),
        staging,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some("mode=0755"),
    )
    .map_err(|e| Error::sys("tmpfs on the new root", e))?;
    chdir(staging).map_err(|e| Error::sys("chdir to the new root", e))?;
    let mut root = Root {
        path: staging,
        dirs: Vec::new(),
        mounts: Mounts {
            points: std::cell::OnceCell::new(),
            staging: staging.to_path_buf(),
        },
    };
    for dir in SYSTEM_DIRS {
        let dir = Path::new(dir);
        // One call tells a link (copied as it is), a directory or anything else (`EINVAL`: not
        // a link) and a missing one (left out).
        match std::fs::read_link(dir) {
            Ok(target) => symlink(&target, in_root(dir)).map_err(|e| Error::io(dir, e))?,
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => system_dir(&mut root, dir)?,
            Err(_) => {}
        }
    }
    // The private `/tmp`: its mount point is new on the fresh tmpfs; a missing source fails
    // the bind.
    let tmp = Path::new("tmp");
    root.dir(tmp).map_err(|e| Error::sys("/tmp", e))?;
    mount(
        Some(&profile.tmp_dir),
        tmp,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
    .map_err(|e| Error::sys(format!("binding {}", profile.tmp_dir.display()), e))?;
    root.mounted(tmp)?;
    // The home directory itself is an empty directory on the tmpfs: only the allowlist shows.
    if let Some(home) = &profile.home {
        let _ = root.dir(in_root(home));
    }
    for path in &profile.home_readable {
        root.bind_if_there(path, true)?;
    }
    for path in &profile.home_writable {
        root.bind_if_there(path, false)?;
    }
    for path in &profile.readable {
        root.bind(path, true)?;
    }
    for path in &profile.writable {
        root.bind(path, false)?;
    }
    for path in &profile.pinned {
        root.bind(path, false)?;
    }
    for path in &profile.protected {
        root.bind(path, true)?;
    }
    mask(profile, &mut root)?;
    build_dev(&mut root)?;
    // `/proc`'s mount point (init mounts it, from inside the new PID namespace).
    root.dir(Path::new("proc"))
        .map_err(|e| Error::sys("/proc", e))?;
    Ok(root)
}

/// A system directory that is not a link: bound read-only when it is a directory. Anything
/// else (a file) fails the bind with `ENOTDIR` and is left out, as a missing one is.
fn system_dir(root: &mut Root<'_>, dir: &Path) -> Result<()> {
    let target = in_root(dir);
    root.dir(target)
        .map_err(|e| Error::sys(format!("binding {}", dir.display()), e))?;
    match mount(
        Some(dir),
        target,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    ) {
        Ok(()) => {}
        Err(Errno::ENOTDIR) => {
            let _ = std::fs::remove_dir(target);
            root.dirs.retain(|known| known != target);
            return Ok(());
        }
        Err(e) => return Err(Error::sys(format!("binding {}", dir.display()), e)),
    }
    root.mounted(target)?;
    root.read_only(target, dir)
}

/// Covers each [`Profile::masked`] path that exists in the new root: a directory with an
/// empty read-only tmpfs, anything else with an empty read-only file. The path is looked at
/// without following a final symlink (Keel lists real files and directories only; a link there
/// now is left alone, its target being checked on its own).
fn mask(profile: &Profile, root: &mut Root<'_>) -> Result<()> {
    // The empty file bound onto masked files: made on the new root's tmpfs at the first one,
    // and unlinked at the end (the binds keep it).
    const EMPTY: &str = ".keel-empty";
    let mut empty = false;
    for path in &profile.masked {
        let target = in_root(path);
        let Ok(meta) = std::fs::symlink_metadata(target) else {
            continue;
        };
        if meta.is_dir() {
            mount(
                Some("tmpfs"),
                target,
                Some("tmpfs"),
                MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC | MsFlags::MS_RDONLY,
                Some("mode=0555,size=4k"),
            )
            .map_err(|e| Error::sys(format!("masking {}", path.display()), e))?;
            root.mounted(target)?;
        } else if !meta.file_type().is_symlink() {
            if !empty {
                mknod(EMPTY, SFlag::S_IFREG, Mode::from_bits_truncate(0o444), 0)
                    .map_err(|e| Error::sys("the empty file for masks", e))?;
                empty = true;
            }
            // The target exists (just looked at): no mount point to make.
            let what = || format!("masking {}", path.display());
            mount(
                Some(EMPTY),
                target,
                None::<&str>,
                MsFlags::MS_BIND,
                None::<&str>,
            )
            .map_err(|e| Error::sys(what(), e))?;
            root.read_only(target, Path::new(EMPTY))?;
        }
    }
    if empty {
        nix::unistd::unlink(EMPTY).map_err(|e| Error::sys("the empty file for masks", e))?;
    }
    Ok(())
}

/// The mount points of the tree the new root is built from, read at most once from
/// `/proc/self/mountinfo`, and only on kernels without `mount_setattr` (before 5.12).
struct Mounts {
    points: std::cell::OnceCell<Result<Vec<PathBuf>, Arc<std::io::Error>>>,
    staging: PathBuf,
}

impl Mounts {
    fn points(&self) -> Result<&[PathBuf]> {
        let read = || read_mount_points().map_err(Arc::new);
        match self.points.get_or_init(read) {
            Ok(points) => Ok(points),
            Err(e) => Err(Error::MountInfo(e.clone())),
        }
    }
}

/// `struct mount_attr` of `mount_setattr(2)`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// Makes `target` and every mount below it read-only in one system call (`mount_setattr` with
/// `AT_RECURSIVE`; Linux 5.12). It changes only the read-only flag, so the flags the kernel
/// locks in a user namespace stay as they are. `Err(ENOSYS)` on older kernels.
fn set_read_only_recursive(target: &Path) -> Result<(), Errno> {
    const MOUNT_ATTR_RDONLY: u64 = 0x1;
    let path = std::ffi::CString::new(target.as_os_str().as_bytes()).map_err(|_| Errno::EINVAL)?;
    let attr = MountAttr {
        attr_set: MOUNT_ATTR_RDONLY,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: `path` is a NUL-terminated string and `attr` a live `mount_attr` of the size
    // passed; the kernel only reads both during the call.
    #[expect(
        unsafe_code,
        reason = "mount_setattr has no wrapper in nix (see SAFETY)"
    )]
    let result = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            libc::AT_RECURSIVE as libc::c_uint,
            &raw const attr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if result == 0 {
        Ok(())
    } else {
        Err(Errno::last())
    }
}

fn read_mount_points() -> std::io::Result<Vec<PathBuf>> {
    let info = std::fs::read_to_string("/proc/self/mountinfo")?;
    let mut points: Vec<PathBuf> = info
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|field| PathBuf::from(unescape(field)))
        .collect();
    points.dedup();
    Ok(points)
}

/// Remounts `target` and every mount below it read-only, keeping the flags the kernel locks
/// (`nosuid`, `nodev`, `noexec`, atime) so the remount is allowed in a user namespace.
fn remount_read_only(target: &Path, source: &Path, mounts: &Mounts) -> Result<()> {
    let what = |point: &Path| format!("remounting {} read-only", point.display());
    match set_read_only_recursive(target) {
        Ok(()) => return Ok(()),
        Err(Errno::ENOSYS) => {}
        Err(e) => return Err(Error::sys(what(target), e)),
    }
    let points: Vec<PathBuf> = if mounts.staging.starts_with(source) {
        // The new root itself lies below the source, so the recursive bind copied mounts made
        // since the snapshot: read the table again (rare: a scratch directory inside a
        // readable path).
        read_mount_points()
            .map_err(|e| Error::MountInfo(Arc::new(e)))?
            .into_iter()
            .filter(|point| point.starts_with(target))
            .collect()
    } else {
        // The bind copied the source's mount and every mount below it: the same points,
        // moved from the source to the target.
        std::iter::once(target.to_path_buf())
            .chain(mounts.points()?.iter().filter_map(|point| {
                let rest = point.strip_prefix(source).ok()?;
                (!rest.as_os_str().is_empty()).then(|| target.join(rest))
            }))
            .collect()
    };
    for point in points {
        let flags = statvfs(&point)
            .map_err(|e| Error::sys(what(&point), e))?
            .flags();
        let mut ms = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY;
        for (fs, m) in [
            (FsFlags::ST_NOSUID, MsFlags::MS_NOSUID),
            (FsFlags::ST_NODEV, MsFlags::MS_NODEV),
            (FsFlags::ST_NOEXEC, MsFlags::MS_NOEXEC),
            (FsFlags::ST_NOATIME, MsFlags::MS_NOATIME),
            (FsFlags::ST_NODIRATIME, MsFlags::MS_NODIRATIME),
            (FsFlags::ST_RELATIME, MsFlags::MS_RELATIME),
        ] {
            if flags.contains(fs) {
                ms |= m;
            }
        }
        mount(None::<&str>, &point, None::<&str>, ms, None::<&str>)
            .map_err(|e| Error::sys(what(&point), e))?;
    }
    Ok(())
}

/// `/proc/self/mountinfo` escapes space, tab, newline and backslash as `\ooo`.
fn unescape(field: &str) -> OsString {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len() + 1
            && let Some(code) = field
                .get(i + 1..i + 4)
                .and_then(|o| u8::from_str_radix(o, 8).ok())
        {
            out.push(code);
            i += 4;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    std::ffi::OsStr::from_bytes(&out).to_os_string()
}

/// A minimal `/dev`: a fresh tmpfs with six nodes bound from the host's, the usual links, a
/// private pty instance and shared memory. Everything on it is new: nothing is looked up.
fn build_dev(root: &mut Root<'_>) -> Result<()> {
    let dev = Path::new("dev");
    root.dir(dev).map_err(|e| Error::sys("/dev", e))?;
    mount(
        Some("tmpfs"),
        dev,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        Some("mode=0755"),
    )
    .map_err(|e| Error::sys("tmpfs on /dev", e))?;
    root.mounted(dev)?;
    for name in ["null", "zero", "full", "random", "urandom", "tty"] {
        // The node to bind onto, in the fresh tmpfs: one `mknod`, no checks (a missing
        // source fails the bind, and is skipped).
        let source = Path::new("/dev").join(name);
        let target = dev.join(name);
        mknod(&target, SFlag::S_IFREG, FILE_MODE, 0)
            .map_err(|e| Error::sys(format!("/dev/{name}"), e))?;
        match mount(
            Some(&source),
            &target,
            None::<&str>,
            MsFlags::MS_BIND,
            None::<&str>,
        ) {
            Ok(()) => {}
            Err(Errno::ENOENT) => {
                let _ = nix::unistd::unlink(&target);
            }
            Err(e) => return Err(Error::sys(format!("binding {}", source.display()), e)),
        }
    }
    for (link, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
        ("ptmx", "pts/ptmx"),
    ] {
        symlink(target, dev.join(link)).map_err(|e| Error::io_in(format!("/dev/{link}"), e))?;
    }
    let pts = dev.join("pts");
    let shm = dev.join("shm");
    // Optional: a private pty instance and shared memory (programs that need them still run).
    if root.dir(&pts).is_ok() {
        let _ = mount(
            Some("devpts"),
            &pts,
            Some("devpts"),
            MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
            Some("newinstance,ptmxmode=0666,mode=620"),
        );
    }
    if root.dir(&shm).is_ok() {
        let _ = mount(
            Some("tmpfs"),
            &shm,
            Some("tmpfs"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            Some("mode=1777"),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::unescape;

    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(unescape("/a\\040b"), "/a b");
        assert_eq!(unescape("/tab\\011and\\012line\\134"), "/tab\tand\nline\\");
        // Not an escape: kept as it is.
        assert_eq!(unescape("/x\\09"), "/x\\09");
        assert_eq!(unescape("/end\\"), "/end\\");
    }
}
