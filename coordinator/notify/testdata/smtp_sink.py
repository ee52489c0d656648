#!/usr/bin/python3
"""An SMTP sink for the notification tests, on Debian's python3-aiosmtpd.

Usage: smtp_sink.py FOLDER USER PASSWORD

Listens on 127.0.0.1 on a free port, prints the port on stdout, requires
AUTH (PLAIN or LOGIN) with USER and PASSWORD (refusing others with 535), and
writes each accepted message to FOLDER/NNNN.eml (written, then renamed),
its first line "X-Sink-Rcpt: a, b" naming the envelope recipients. Runs until
killed.
"""
import asyncio
import os
import socket
import sys

from aiosmtpd.smtp import SMTP, AuthResult, LoginPassword


def main():
    folder, user, password = sys.argv[1:4]

    class Handler:
        async def handle_DATA(self, server, session, envelope):
            n = len([f for f in os.listdir(folder) if f.endswith(".eml")])
            path = os.path.join(folder, "%04d.eml" % n)
            data = envelope.original_content or envelope.content
            if isinstance(data, str):
                data = data.encode()
            with open(path + ".tmp", "wb") as f:
                f.write(("X-Sink-Rcpt: %s\r\n" % ", ".join(envelope.rcpt_tos)).encode())
                f.write(data)
            os.rename(path + ".tmp", path)
            return "250 OK"

    def authenticator(server, session, envelope, mechanism, auth_data):
        ok = (isinstance(auth_data, LoginPassword)
              and auth_data.login.decode() == user
              and auth_data.password.decode() == password)
        return AuthResult(success=ok, handled=False)

    async def serve():
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        loop = asyncio.get_running_loop()
        await loop.create_server(
            lambda: SMTP(Handler(), hostname="localhost", authenticator=authenticator,
                         auth_required=True, auth_require_tls=False),
            sock=sock)
        print(sock.getsockname()[1], flush=True)
        await asyncio.Event().wait()

    asyncio.run(serve())


if __name__ == "__main__":
    main()
