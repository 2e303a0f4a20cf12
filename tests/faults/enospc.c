/* A small, full filesystem where mounting one is impossible: an LD_PRELOAD layer.
 *
 * The file named by SEGLOG_FULL_DISKS lists "disks", one a line: a size in bytes and an
 * absolute directory ("2097152 /tmp/x/disk-0"). Files under a listed directory share that
 * size as a tmpfs of that size would: what they use is the sum of their allocated blocks
 * (st_blocks), and a write that needs more pages than are free writes the part that fits
 * (a short write) or fails with ENOSPC when nothing fits, as on tmpfs:
 *
 *   - write, pwrite, writev, pwritev(2), sendfile and copy_file_range into such a file
 *     count the pages they would allocate: those past the end of the file and the holes
 *     of a sparse file (an index preallocated with ftruncate) inside the range;
 *   - fallocate and posix_fallocate fail whole with ENOSPC if their holes do not fit;
 *   - statvfs and statfs of a path under the directory report the disk's size and what
 *     is free, so capacity checks see the same numbers as on tmpfs;
 *   - ftruncate, fsync and unlink pass through: growing a file with ftruncate allocates
 *     nothing and syncing a full tmpfs succeeds, so neither fails there either.
 *
 * At most 8 disks, each directory shorter than 512 bytes.
 *
 * The file is read again on every call, so rewriting it gives space back (or takes it away)
 * at once, as `mount -o remount,size=...` does. Without SEGLOG_FULL_DISKS, or for files
 * elsewhere, every call goes straight to the C library. A shared writable mmap cannot be
 * faulted here: a store into a hole of a full tmpfs raises SIGBUS, here it succeeds.
 *
 * Build: cc -shared -fPIC -O2 -o enospc.so enospc.c -ldl -lpthread
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define PAGE 4096LL
#define MAX_DISKS 8
/* Small buffers: everything lives on the stack of the write that is checked. */
#define DIR_MAX 512

/* Looked up by the test fixtures (ctypes) to know that this layer is loaded. */
const int seglog_fault_layer_loaded = 1;

struct disk {
    long long size;
    char dir[DIR_MAX];
    size_t len;
    int fsync_fails;  /* a line "<size> <dir> fsync-eio": fsync and fdatasync fail with EIO there */
};

/* One writer at a time into watched files, so that two threads cannot both take the last page. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void *real(const char *name) {
    void *f = dlsym(RTLD_NEXT, name);
    if (f == NULL) {
        fprintf(stderr, "enospc.so: no %s in the C library\n", name);
        abort();
    }
    return f;
}

#define REAL(ret, name, ...) \
    static ret (*real_##name)(__VA_ARGS__); \
    if (real_##name == NULL) real_##name = real(#name)

/* Read with open/read into the stack, not stdio: write() may be called from a signal handler
 * (Python's faulthandler), where malloc could deadlock. */
static int load_disks(struct disk *disks) {
    const char *control = getenv("SEGLOG_FULL_DISKS");
    if (control == NULL || *control == '\0') return 0;
    int fd = open(control, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char text[4096];
    ssize_t length = 0, got;
    while (length < (ssize_t)sizeof text - 1 && (got = read(fd, text + length, sizeof text - 1 - length)) > 0)
        length += got;
    close(fd);
    text[length] = '\0';
    int n = 0;
    for (char *line = text, *end; n < MAX_DISKS && *line; line = end + 1) {
        end = strchr(line, '\n');
        if (end == NULL) break;  /* a line is whole only with its newline */
        *end = '\0';
        struct disk *d = &disks[n];
        char *dir;
        d->size = strtoll(line, &dir, 10);
        if (dir == line || *dir != ' ' || dir[1] != '/' || strlen(dir + 1) >= sizeof d->dir) continue;
        strcpy(d->dir, dir + 1);
        d->len = strlen(d->dir);
        static const char eio[] = " fsync-eio";
        size_t flag = sizeof eio - 1;
        d->fsync_fails = d->len > flag && strcmp(d->dir + d->len - flag, eio) == 0;
        if (d->fsync_fails) d->dir[d->len -= flag] = '\0';
        n++;
    }
    return n;
}

static const struct disk *disk_of_path(const char *path, const struct disk *disks, int n) {
    for (int i = 0; i < n; i++) {
        const struct disk *d = &disks[i];
        if (strncmp(path, d->dir, d->len) == 0 && (path[d->len] == '/' || path[d->len] == '\0')) return d;
    }
    return NULL;
}

/* The disk a regular file open as fd lies on, or NULL; fills *st. */
static const struct disk *disk_of_fd(int fd, struct disk *disks, struct stat *st) {
    if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) return NULL;
    int n = load_disks(disks);
    if (n == 0) return NULL;
    char link[64], path[DIR_MAX + 64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t len = readlink(link, path, sizeof path - 1);
    if (len <= 0) return NULL;
    path[len] = '\0';
    return disk_of_path(path, disks, n);
}

static long long used_bytes;

static int add_blocks(const char *path, const struct stat *st, int type, struct FTW *ftw) {
    (void)path, (void)ftw;
    if (type == FTW_F && S_ISREG(st->st_mode)) used_bytes += (long long)st->st_blocks * 512;
    return 0;
}

/* Pages still free on the disk (caller holds the lock). */
static long long free_pages(const struct disk *d) {
    used_bytes = 0;
    nftw(d->dir, add_blocks, 8, FTW_PHYS | FTW_MOUNT);
    long long free_bytes = d->size - used_bytes;
    return free_bytes > 0 ? free_bytes / PAGE : 0;
}

/* Whether the page at `page` of the file is allocated: past the end never, inside a file
 * without holes always, otherwise as SEEK_DATA says (on a second descriptor, so the file
 * offset of fd stays where it is). */
static int allocated(int fd, const struct stat *st, long long page, int *probe) {
    long long file_pages = (st->st_size + PAGE - 1) / PAGE;
    if (page >= file_pages) return 0;
    if ((long long)st->st_blocks * 512 >= file_pages * PAGE) return 1;
    if (*probe < 0) {
        char link[64];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        *probe = open(link, O_RDONLY | O_CLOEXEC);
        if (*probe < 0) return 0;
    }
    off_t data = lseek(*probe, page * PAGE, SEEK_DATA);
    return data >= 0 && data < (page + 1) * PAGE;
}

/* How many of `len` bytes at `pos` fit on the disk: all, a prefix ending at the first page
 * that does not fit, or 0. `whole` asks for all or nothing (fallocate). */
static size_t fitting(int fd, const struct stat *st, const struct disk *d, long long pos, size_t len, int whole) {
    if (len == 0) return 0;
    long long free = free_pages(d), needed = 0;
    long long first = pos / PAGE, last = (pos + (long long)len - 1) / PAGE;
    int probe = -1;
    size_t fits = len;
    for (long long page = first; page <= last; page++) {
        if (allocated(fd, st, page, &probe)) continue;
        if (needed == free) {
            fits = whole || page * PAGE <= pos ? 0 : (size_t)(page * PAGE - pos);
            break;
        }
        needed++;
    }
    if (probe >= 0) close(probe);
    return fits;
}

static long long position_of(int fd, const struct stat *st) {
    int flags = fcntl(fd, F_GETFL);
    return flags >= 0 && (flags & O_APPEND) ? st->st_size : lseek(fd, 0, SEEK_CUR);
}

/* The iovecs that hold the first `bytes` bytes of `iov`, in `out` (malloc'd, NULL if none are cut). */
static struct iovec *cut_iov(const struct iovec *iov, int count, size_t bytes, int *out_count) {
    struct iovec *out = malloc(sizeof *out * (count > 0 ? count : 1));
    if (out == NULL) return NULL;
    int n = 0;
    for (int i = 0; i < count && bytes > 0; i++, n++) {
        out[n] = iov[i];
        if (out[n].iov_len > bytes) out[n].iov_len = bytes;
        bytes -= out[n].iov_len;
    }
    *out_count = n;
    return out;
}

static size_t iov_total(const struct iovec *iov, int count) {
    size_t total = 0;
    for (int i = 0; i < count; i++) total += iov[i].iov_len;
    return total;
}

static ssize_t no_space(void) {
    pthread_mutex_unlock(&lock);
    errno = ENOSPC;
    return -1;
}

/* --- writes ------------------------------------------------------------------------------ */

ssize_t write(int fd, const void *buf, size_t count) {
    REAL(ssize_t, write, int, const void *, size_t);
    struct disk disks[MAX_DISKS];
    struct stat st;
    const struct disk *d = count ? disk_of_fd(fd, disks, &st) : NULL;
    if (d == NULL) return real_write(fd, buf, count);
    pthread_mutex_lock(&lock);
    fstat(fd, &st);
    size_t fits = fitting(fd, &st, d, position_of(fd, &st), count, 0);
    if (fits == 0) return no_space();
    ssize_t done = real_write(fd, buf, fits);
    pthread_mutex_unlock(&lock);
    return done;
}

static ssize_t guarded_pwrite(ssize_t (*pw)(int, const void *, size_t, off_t), int fd, const void *buf,
                              size_t count, off_t offset) {
    struct disk disks[MAX_DISKS];
    struct stat st;
    const struct disk *d = count ? disk_of_fd(fd, disks, &st) : NULL;
    if (d == NULL) return pw(fd, buf, count, offset);
    pthread_mutex_lock(&lock);
    fstat(fd, &st);
    size_t fits = fitting(fd, &st, d, offset, count, 0);
    if (fits == 0) return no_space();
    ssize_t done = pw(fd, buf, fits, offset);
    pthread_mutex_unlock(&lock);
    return done;
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset) {
    REAL(ssize_t, pwrite, int, const void *, size_t, off_t);
    return guarded_pwrite(real_pwrite, fd, buf, count, offset);
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off64_t offset) {
    REAL(ssize_t, pwrite64, int, const void *, size_t, off_t);
    return guarded_pwrite(real_pwrite64, fd, buf, count, offset);
}

/* writev, pwritev, pwritev2: `offset` -1 means the file offset (or the end, with O_APPEND). */
static ssize_t guarded_writev(int fd, const struct iovec *iov, int count, off_t offset, int flags,
                              ssize_t (*call)(int, const struct iovec *, int, off_t, int)) {
    struct disk disks[MAX_DISKS];
    struct stat st;
    size_t total = iov_total(iov, count);
    const struct disk *d = total ? disk_of_fd(fd, disks, &st) : NULL;
    if (d == NULL) return call(fd, iov, count, offset, flags);
    pthread_mutex_lock(&lock);
    fstat(fd, &st);
    long long pos = offset >= 0 && !(flags & RWF_APPEND) ? offset : position_of(fd, &st);
    if (flags & RWF_APPEND) pos = st.st_size;
    size_t fits = fitting(fd, &st, d, pos, total, 0);
    if (fits == 0) return no_space();
    ssize_t done;
    if (fits == total) {
        done = call(fd, iov, count, offset, flags);
    } else {
        int cut_count = 0;
        struct iovec *cut = cut_iov(iov, count, fits, &cut_count);
        if (cut == NULL) return no_space();
        done = call(fd, cut, cut_count, offset, flags);
        free(cut);
    }
    pthread_mutex_unlock(&lock);
    return done;
}

static ssize_t call_writev(int fd, const struct iovec *iov, int count, off_t offset, int flags) {
    (void)offset, (void)flags;
    REAL(ssize_t, writev, int, const struct iovec *, int);
    return real_writev(fd, iov, count);
}

static ssize_t call_pwritev(int fd, const struct iovec *iov, int count, off_t offset, int flags) {
    (void)flags;
    REAL(ssize_t, pwritev64, int, const struct iovec *, int, off_t);
    return real_pwritev64(fd, iov, count, offset);
}

static ssize_t call_pwritev2(int fd, const struct iovec *iov, int count, off_t offset, int flags) {
    REAL(ssize_t, pwritev64v2, int, const struct iovec *, int, off_t, int);
    return real_pwritev64v2(fd, iov, count, offset, flags);
}

ssize_t writev(int fd, const struct iovec *iov, int count) {
    return guarded_writev(fd, iov, count, -1, 0, call_writev);
}

ssize_t pwritev(int fd, const struct iovec *iov, int count, off_t offset) {
    return guarded_writev(fd, iov, count, offset, 0, call_pwritev);
}

ssize_t pwritev64(int fd, const struct iovec *iov, int count, off64_t offset) {
    return guarded_writev(fd, iov, count, offset, 0, call_pwritev);
}

ssize_t pwritev2(int fd, const struct iovec *iov, int count, off_t offset, int flags) {
    return guarded_writev(fd, iov, count, offset, flags, call_pwritev2);
}

ssize_t pwritev64v2(int fd, const struct iovec *iov, int count, off64_t offset, int flags) {
    return guarded_writev(fd, iov, count, offset, flags, call_pwritev2);
}

/* sendfile and copy_file_range write into out_fd (shutil.copyfile uses sendfile). */
static ssize_t guarded_copy(int out_fd, off_t *out_offset, size_t count, size_t *fits) {
    struct disk disks[MAX_DISKS];
    struct stat st;
    *fits = count;
    const struct disk *d = count ? disk_of_fd(out_fd, disks, &st) : NULL;
    if (d == NULL) return 0;
    pthread_mutex_lock(&lock);
    fstat(out_fd, &st);
    long long pos = out_offset ? *out_offset : position_of(out_fd, &st);
    *fits = fitting(out_fd, &st, d, pos, count, 0);
    if (*fits == 0) return no_space();
    return 1;  /* locked: the caller copies, then unlocks */
}

ssize_t sendfile(int out_fd, int in_fd, off_t *offset, size_t count) {
    REAL(ssize_t, sendfile, int, int, off_t *, size_t);
    size_t fits;
    ssize_t guarded = guarded_copy(out_fd, NULL, count, &fits);
    if (guarded < 0) return -1;
    ssize_t done = real_sendfile(out_fd, in_fd, offset, fits);
    if (guarded) pthread_mutex_unlock(&lock);
    return done;
}

ssize_t sendfile64(int out_fd, int in_fd, off64_t *offset, size_t count) {
    return sendfile(out_fd, in_fd, offset, count);
}

ssize_t copy_file_range(int in_fd, off_t *in_offset, int out_fd, off_t *out_offset, size_t len,
                        unsigned int flags) {
    REAL(ssize_t, copy_file_range, int, off_t *, int, off_t *, size_t, unsigned int);
    size_t fits;
    ssize_t guarded = guarded_copy(out_fd, out_offset, len, &fits);
    if (guarded < 0) return -1;
    ssize_t done = real_copy_file_range(in_fd, in_offset, out_fd, out_offset, fits, flags);
    if (guarded) pthread_mutex_unlock(&lock);
    return done;
}

/* --- allocation ---------------------------------------------------------------------------- */

/* 0 if [offset, offset + len) fits whole (or needs no room: punching, collapsing), else ENOSPC. */
static int room_for(int fd, int mode, off_t offset, off_t len) {
    struct disk disks[MAX_DISKS];
    struct stat st;
    if (mode & ~FALLOC_FL_KEEP_SIZE) return 0;
    const struct disk *d = len > 0 ? disk_of_fd(fd, disks, &st) : NULL;
    if (d == NULL) return 0;
    pthread_mutex_lock(&lock);
    fstat(fd, &st);
    size_t fits = fitting(fd, &st, d, offset, (size_t)len, 1);
    pthread_mutex_unlock(&lock);
    return fits ? 0 : ENOSPC;
}

int fallocate(int fd, int mode, off_t offset, off_t len) {
    REAL(int, fallocate, int, int, off_t, off_t);
    int refused = room_for(fd, mode, offset, len);
    if (refused) {
        errno = refused;
        return -1;
    }
    return real_fallocate(fd, mode, offset, len);
}

int fallocate64(int fd, int mode, off64_t offset, off64_t len) {
    REAL(int, fallocate64, int, int, off_t, off_t);
    int refused = room_for(fd, mode, offset, len);
    if (refused) {
        errno = refused;
        return -1;
    }
    return real_fallocate64(fd, mode, offset, len);
}

int posix_fallocate(int fd, off_t offset, off_t len) {
    REAL(int, posix_fallocate, int, off_t, off_t);
    int refused = room_for(fd, 0, offset, len);
    return refused ? refused : real_posix_fallocate(fd, offset, len);
}

int posix_fallocate64(int fd, off64_t offset, off64_t len) {
    REAL(int, posix_fallocate64, int, off_t, off_t);
    int refused = room_for(fd, 0, offset, len);
    return refused ? refused : real_posix_fallocate64(fd, offset, len);
}

/* --- what the disk reports ------------------------------------------------------------------ */

static const struct disk *disk_of(const char *path, int fd, struct disk *disks) {
    int n = load_disks(disks);
    if (n == 0) return NULL;
    char resolved[PATH_MAX];
    if (path != NULL) {
        if (realpath(path, resolved) == NULL) return NULL;
    } else {
        char link[64];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t len = readlink(link, resolved, sizeof resolved - 1);
        if (len <= 0) return NULL;
        resolved[len] = '\0';
    }
    return disk_of_path(resolved, disks, n);
}

/* The counts of a `size`-byte disk with `free` pages free, in units of `unit` bytes. */
static void disk_counts(const struct disk *d, unsigned long unit, unsigned long long *blocks,
                        unsigned long long *free_blocks, unsigned long long *available) {
    pthread_mutex_lock(&lock);
    long long free = free_pages(d);
    pthread_mutex_unlock(&lock);
    if (unit == 0) unit = PAGE;
    *blocks = (unsigned long long)d->size / unit;
    *free_blocks = *available = (unsigned long long)(free * PAGE) / unit;
}

#define STATVFS(name, type, arg_type, path_arg, fd_arg) \
    int name(arg_type where, struct type *buf) { \
        REAL(int, name, arg_type, struct type *); \
        int result = real_##name(where, buf); \
        struct disk disks[MAX_DISKS]; \
        const struct disk *d = result == 0 ? disk_of(path_arg, fd_arg, disks) : NULL; \
        if (d != NULL) { \
            unsigned long long blocks, free_blocks, available; \
            disk_counts(d, buf->f_frsize ? buf->f_frsize : buf->f_bsize, &blocks, &free_blocks, &available); \
            buf->f_blocks = blocks; \
            buf->f_bfree = free_blocks; \
            buf->f_bavail = available; \
        } \
        return result; \
    }

STATVFS(statvfs, statvfs, const char *, where, -1)
STATVFS(statvfs64, statvfs64, const char *, where, -1)
STATVFS(fstatvfs, statvfs, int, NULL, where)
STATVFS(fstatvfs64, statvfs64, int, NULL, where)
STATVFS(statfs, statfs, const char *, where, -1)
STATVFS(statfs64, statfs64, const char *, where, -1)
STATVFS(fstatfs, statfs, int, NULL, where)
STATVFS(fstatfs64, statfs64, int, NULL, where)

/* A disk whose write-back fails (EIO) fails fsync and fdatasync of its regular files. */
static int failing_sync(int fd) {
    struct disk disks[MAX_DISKS];
    struct stat st;
    const struct disk *d = disk_of_fd(fd, disks, &st);
    if (d != NULL && d->fsync_fails) {
        errno = EIO;
        return -1;
    }
    return 0;
}

int fsync(int fd) {
    REAL(int, fsync, int);
    return failing_sync(fd) ? -1 : real_fsync(fd);
}

int fdatasync(int fd) {
    REAL(int, fdatasync, int);
    return failing_sync(fd) ? -1 : real_fdatasync(fd);
}
