#pragma once
// What a kernel build request may name and carry, checked the same way where
// it is accepted (the coordinator's CreateCampaign) and where it is run (a
// builder agent, which trusts no coordinator to have checked): the source is
// a name relative to the builder's source roots, and patches and config
// fragments are bytes with a file name, never paths on the builder.

#include <string>
#include <string_view>
#include <vector>

namespace leapfrog::kbuild {

// Lowercase hex sha256 of bytes.
std::string sha256_hex(std::string_view bytes);

// "" when `source` names a tarball or folder relative to a source root
// ("linux-source-6.1.tar.xz", "trees/linux"), else why not: empty, absolute,
// a ".." or "." component, an empty component, or a control byte.
std::string source_name_problem(const std::string& source);

// "" when `name` is a file name a build may carry ("0001-fix.patch"), else
// why not: empty, ".", "..", a '/' or a control byte.
std::string file_name_problem(const std::string& name);

// The file under one of `roots` that `source` names (roots tried in order,
// the first that holds it wins), resolved through symlinks. Throws
// BuildError("source") when the name is bad, when no root holds it, or when
// the name resolves outside its root (a symlink out of it).
std::string resolve_source(const std::string& source, const std::vector<std::string>& roots);

// The default source roots: where Debian's linux-source-* packages put their
// tarballs.
std::vector<std::string> default_source_roots();

}  // namespace leapfrog::kbuild
