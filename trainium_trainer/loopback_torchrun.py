"""torchrun whose rendezvous store listens on the loopback master address only.

Stock torchrun's store (a TCPStore in node 0's agent) listens on every interface, whatever
``--master_addr`` says. When the whole job runs on one host at a loopback address (local compute, a
one-node ECS task), ``trainium_trainer.launch`` runs this module instead: node 0 binds the store's socket to the
master address itself and hands it to TCPStore (``master_listen_fd``), so nothing off the host can reach
the rendezvous. The arguments are torchrun's own.
"""

from __future__ import annotations

import socket
import sys
from typing import Any


def option(argv: list[str], name: str) -> str | None:
    for arg in argv:
        if arg.startswith(f"--{name}="):
            return arg.split("=", 1)[1]
    return None


def bind_listener(address: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((address, port))
    listener.listen(4096)
    return listener


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    from torch.distributed import TCPStore
    from torch.distributed.elastic.rendezvous import static_tcp_rendezvous
    from torch.distributed.run import main as torchrun

    address, port = option(argv, "master_addr"), option(argv, "master_port")
    if option(argv, "node_rank") in (None, "0") and address and port:
        listener = bind_listener(address, int(port))

        def store(*args: Any, **kwargs: Any) -> TCPStore:
            is_master = args[3] if len(args) > 3 else kwargs.get("is_master", False)
            if is_master:
                kwargs["master_listen_fd"] = listener.fileno()
            return TCPStore(*args, **kwargs)

        # the one place torchrun's static rendezvous makes its store; a factory stands in for the class
        static_tcp_rendezvous.TCPStore = store  # type: ignore[misc, assignment]  # a deliberate patch of the class
    torchrun(argv)


if __name__ == "__main__":
    main()
