// Kernels with patch series for the browser test, made by the real
// `leapfrog kernel build` (patch series, build cache, failure record,
// registration) on a toy source tree whose Makefile stands in for Kbuild, as in
// common/kernel/kernel_build_test.cc. Its "build" copies Debian's kernel
// image, so the ready kernel goes through the real kernel store (inspect,
// extract the ELF vmlinux) and registers as "ready"; a patch that makes the
// toy compiler fail gives a real "build-failure" kernel with its log.
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

// Debian's 6.1 kernel image on this machine (the toy build's output: the toy
// tree says it is 6.1).
function debianImage() {
  const boot = fs.existsSync('/boot') ? fs.readdirSync('/boot').filter((f) => /^vmlinuz-6\.1\./.test(f)).sort() : [];
  if (!boot.length) throw new Error('no /boot/vmlinuz-6.1.* to stand in for the toy build output (install linux-image-amd64)');
  return path.join('/boot', boot[boot.length - 1]);
}

const makefile = (image) => `# Stand-in for Kbuild: the targets and variables leapfrog kernel build uses.
VERSION = 6
PATCHLEVEL = 1
SUBLEVEL = 0
allnoconfig:
\tmkdir -p $(O)
\tgrep '^CONFIG_' $(KCONFIG_ALLCONFIG) > $(O)/.config
bzImage:
\t@echo "  CC      fs/namei.o"
\t@if grep -q BREAK_BUILD fs/namei.c; then \\
\t  echo "fs/namei.c: In function 'may_lookup':"; \\
\t  echo "fs/namei.c:3:9: error: 'BREAK_BUILD' undeclared (first use in this function)"; \\
\t  echo "    3 |         BREAK_BUILD;"; \\
\t  echo "      |         ^~~~~~~~~~~"; \\
\t  echo "make[3]: *** [scripts/Makefile.build:250: fs/namei.o] Error 1"; \\
\t  echo "make[2]: *** [scripts/Makefile.build:500: fs] Error 2"; \\
\t  exit 1; fi
\t@echo "  LD      vmlinux"
\t@mkdir -p $(O)/arch/x86/boot $(O)/include/config
\t@cp ${image} $(O)/vmlinux
\t@cp ${image} $(O)/arch/x86/boot/bzImage
\t@echo "6.1.0$$(sed -n 's/^CONFIG_LOCALVERSION="\\(.*\\)"/\\1/p' $(O)/.config)" > $(O)/include/config/kernel.release
\t@echo "Kernel: arch/x86/boot/bzImage is ready  (#1)"
`;

const namei = 'static int may_lookup(struct inode *inode)\n{\n\tint err;\n\terr = inode_permission(inode, MAY_EXEC);\n\treturn err;\n}\n';

// A git-format patch of fs/namei.c whose one hunk replaces line `from` of `base` by `to`.
const patch = (subject, base, from, to) => {
  const lines = base.trimEnd().split('\n');
  if (!lines.includes(from)) throw new Error(`toy patch: no line ${JSON.stringify(from)}`);
  const body = lines.map((l) => (l === from ? `-${from}\n+${to}` : ` ${l}`)).join('\n');
  return `From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001
From: Leapfrog Test <test@leapfrog.invalid>
Subject: ${subject}

---
--- a/fs/namei.c
+++ b/fs/namei.c
@@ -1,${lines.length} +1,${lines.length} @@
${body}
`;
};

// Writes the toy tree and three patches under `dir`; returns their paths.
export function writeToyKernel(dir) {
  const tree = path.join(dir, 'linux');
  fs.mkdirSync(path.join(tree, 'fs'), { recursive: true });
  fs.writeFileSync(path.join(tree, 'Makefile'), makefile(debianImage()));
  fs.writeFileSync(path.join(tree, 'fs', 'namei.c'), namei);
  const p1 = path.join(dir, '0001-namei-recheck-exec-permission.patch');
  const p2 = path.join(dir, '0002-namei-drop-stale-grants.patch');
  const p3 = path.join(dir, '0002-namei-wip-grant-cache.patch');
  const exec = ['\terr = inode_permission(inode, MAY_EXEC);', '\terr = inode_permission(inode, MAY_EXEC | MAY_NOT_BLOCK);'];
  fs.writeFileSync(p1, patch('[PATCH 1/2] namei: recheck exec permission after setattr', namei, ...exec));
  // p2 and p3 both apply on top of p1: p2 builds, p3 does not compile.
  const afterP1 = namei.replace(exec[0], exec[1]);
  fs.writeFileSync(p2, patch('[PATCH 2/2] namei: drop stale grants when attributes change', afterP1, '\tint err;', '\tint err = 0;'));
  fs.writeFileSync(p3, patch('[PATCH 2/2] namei: WIP grant cache (does not build)', afterP1, '\tint err;', '\tBREAK_BUILD;'));
  return { tree, patches: { p1, p2, p3 } };
}

export const sha256File = (p) => crypto.createHash('sha256').update(fs.readFileSync(p)).digest('hex');

// `leapfrog kernel build` through the real CLI: { status, stdout, stderr }.
export function kernelBuild(lf, label, tree, patches, cacheDir, extra = []) {
  const args = ['--data-dir', lf.data, '--json', 'kernel', 'build', label, '--source', tree, '--cache-dir', cacheDir, '--jobs', '1', ...extra];
  for (const p of patches) args.push('--patch', p);
  const r = spawnSync(lf.exe, args, { encoding: 'utf8' });
  if (r.error) throw r.error;
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}
