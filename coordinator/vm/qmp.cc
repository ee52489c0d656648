#include "coordinator/vm/qmp.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "coordinator/vm/qemu_process.h"

namespace leapfrog::vm {

using Steady = std::chrono::steady_clock;

QmpClient::QmpClient(const std::string& socket_path, std::chrono::milliseconds timeout)
    : timeout_(timeout) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof addr.sun_path)
    throw QmpError("QMP socket path too long: \"" + socket_path + "\"");
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  const auto until = Steady::now() + timeout;
  for (;;) {
    fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw QmpError(std::string("socket: ") + std::strerror(errno));
    if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) break;
    const int e = errno;
    close(fd_);
    fd_ = -1;
    if (Steady::now() >= until)
      throw QmpError("cannot connect to QMP at \"" + socket_path + "\": " + std::strerror(e));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  deadline_ = Steady::now() + timeout_;
  const nlohmann::json greeting = read_message();
  if (!greeting.contains("QMP")) throw QmpError("no QMP greeting: " + greeting.dump());
  execute("qmp_capabilities");
}

QmpClient::~QmpClient() {
  if (fd_ >= 0) close(fd_);
}

nlohmann::json QmpClient::read_message() {
  for (;;) {
    const size_t nl = buffer_.find('\n');
    if (nl != std::string::npos) {
      const std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      try {
        return nlohmann::json::parse(line);
      } catch (const nlohmann::json::exception& e) {
        throw QmpError("malformed QMP message \"" + line + "\": " + e.what());
      }
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Steady::now());
    if (left.count() <= 0)
      throw QmpError("QMP: no reply within " + std::to_string(timeout_.count()) + " ms");
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    const ssize_t n = read(fd_, buf, sizeof buf);
    if (n == 0) throw QmpError("QMP: QEMU closed the connection");
    if (n < 0) {
      if (errno == EINTR) continue;
      throw QmpError(std::string("QMP read: ") + std::strerror(errno));
    }
    buffer_.append(buf, static_cast<size_t>(n));
  }
}

nlohmann::json QmpClient::execute(const std::string& command, const nlohmann::json& arguments) {
  nlohmann::json msg = {{"execute", command}};
  if (!arguments.is_null()) msg["arguments"] = arguments;
  const std::string text = msg.dump() + "\n";
  if (write(fd_, text.data(), text.size()) != static_cast<ssize_t>(text.size()))
    throw QmpError("QMP write: " + std::string(std::strerror(errno)));
  deadline_ = Steady::now() + timeout_;
  for (;;) {
    const nlohmann::json reply = read_message();
    if (reply.contains("return")) return reply["return"];
    if (reply.contains("error"))
      throw QmpError("QEMU refused " + command + ": " + reply["error"].value("desc", reply.dump()));
    // An event: skip it.
  }
}

namespace {
// Blocks of shared (file-backed) RAM are left out of the stream: the file
// has them. Both sides must agree, so copies set it too.
void ignore_shared_ram(QmpClient& qmp) {
  qmp.execute("migrate-set-capabilities",
              {{"capabilities", nlohmann::json::array({{{"capability", "x-ignore-shared"}, {"state", true}}})}});
}
}  // namespace

void load_vm_state(QmpClient& qmp, const std::string& file) {
  ignore_shared_ram(qmp);
  qmp.execute("migrate-incoming", {{"uri", "exec:cat " + shell_quote(file)}});
}

void save_vm_state(QmpClient& qmp, const std::string& file, std::chrono::milliseconds timeout,
                   bool ram_in_file) {
  // The VM is stopped first, so that the file is one consistent instant:
  // a live migration of a running TCG guest depends on QEMU tracking every
  // page a vCPU writes meanwhile, and a copy restored from a save of the
  // running template (whose agent polls for its identity) once crashed in
  // the idle task. The guest only waits for its identity here; it resumes
  // with `cont`. QEMU's default bandwidth cap (128 MiB/s) is for networks,
  // not a local file.
  qmp.execute("stop");
  if (ram_in_file) ignore_shared_ram(qmp);
  qmp.execute("migrate-set-parameters", {{"max-bandwidth", int64_t{1} << 40}});
  qmp.execute("migrate", {{"uri", "exec:cat > " + shell_quote(file)}});
  const auto until = Steady::now() + timeout;
  for (;;) {
    const nlohmann::json st = qmp.execute("query-migrate");
    const std::string status = st.value("status", "");
    if (status == "completed") return;
    if (status == "failed" || status == "cancelled")
      throw QmpError("saving the VM to \"" + file + "\" " + status + ": " +
                     st.value("error-desc", ""));
    if (Steady::now() >= until) {
      qmp.execute("migrate_cancel");
      throw QmpError("saving the VM to \"" + file + "\" took over " +
                     std::to_string(timeout.count()) + " ms");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace leapfrog::vm
