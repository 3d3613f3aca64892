package main

// systemOpener opens a file in the user's browser.
const systemOpener = "open"
