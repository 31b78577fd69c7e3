"""A warm LibreOffice: runs under the system ``python3`` (Debian's ``python3-uno``).

Started by ``recalc`` as ``python3 _lo_helper.py SOFFICE PROFILE PIPE``: it starts one
headless ``soffice`` listening on a private pipe, connects over UNO and then serves JSON
lines on stdin, ``{"files": [[src, dst], ...]}``: each workbook is opened hidden,
recalculated (``calculateAll``) and stored as xlsx. Replies ``{"ok": true}`` or
``{"error": "..."}``. Opening a document in a running office takes tens of milliseconds,
against seconds for a cold ``soffice --convert-to``.
"""

import json
import subprocess
import sys
import time

import uno
from com.sun.star.beans import PropertyValue
from com.sun.star.connection import NoConnectException


def prop(name, value):
    p = PropertyValue()
    p.Name, p.Value = name, value
    return p


def main():
    soffice, profile, pipe = sys.argv[1:4]
    office = subprocess.Popen(
        [soffice, "-env:UserInstallation=" + uno.systemPathToFileUrl(profile), "--headless", "--invisible",
         "--nologo", "--norestore", "--nolockcheck", "--nodefault",
         "--accept=pipe,name=" + pipe + ";urp;StarOffice.ComponentContext"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    local = uno.getComponentContext()
    resolver = local.ServiceManager.createInstanceWithContext("com.sun.star.bridge.UnoUrlResolver", local)
    ctx = None
    deadline = time.monotonic() + 120
    while ctx is None:
        try:
            ctx = resolver.resolve("uno:pipe,name=" + pipe + ";urp;StarOffice.ComponentContext")
        except NoConnectException:
            if office.poll() is not None or time.monotonic() > deadline:
                sys.stdout.write(json.dumps({"error": f"soffice did not start (exit {office.poll()})"}) + "\n")
                sys.stdout.flush()
                return
            time.sleep(0.1)
    desktop = ctx.ServiceManager.createInstanceWithContext("com.sun.star.frame.Desktop", ctx)
    sys.stdout.write(json.dumps({"ready": True}) + "\n")
    sys.stdout.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            for src, dst in json.loads(line)["files"]:
                doc = desktop.loadComponentFromURL(uno.systemPathToFileUrl(src), "_blank", 0,
                                                   (prop("Hidden", True), prop("ReadOnly", True),
                                                    prop("FilterName", "Calc MS Excel 2007 XML")))
                if doc is None:
                    raise RuntimeError("LibreOffice could not open " + src)
                try:
                    doc.calculateAll()
                    doc.storeToURL(uno.systemPathToFileUrl(dst), (prop("FilterName", "Calc MS Excel 2007 XML"),))
                finally:
                    doc.close(True)
            reply = {"ok": True}
        except Exception as exc:  # an answer, not a hang: the host decides what it means
            reply = {"error": repr(exc)[:800]}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
    try:
        desktop.terminate()
    except Exception:
        pass
    office.kill()


if __name__ == "__main__":
    main()
