// citation-js reads one export file and prints what it understood as CSL-JSON (one array) on stdout.
//   node readback.mjs bibtex|ris|csljson FILE
import { readFileSync } from 'node:fs'
import { Cite } from '@citation-js/core'
import '@citation-js/plugin-bibtex'
import '@citation-js/plugin-ris'
import '@citation-js/plugin-csl'

// The input types citation-js's plugins register; forcing them makes a misread an error, not a guess.
const TYPES = { bibtex: '@bibtex/text', ris: '@ris/file', csljson: '@csl/list+object' }

const [format, file] = process.argv.slice(2)
if (!(format in TYPES) || !file) {
  console.error('usage: node readback.mjs bibtex|ris|csljson FILE')
  process.exit(2)
}
try {
  const text = readFileSync(file, 'utf8')
  const input = format === 'csljson' ? JSON.parse(text) : text
  const cite = new Cite(input, { forceType: TYPES[format] })
  // _graph (how citation-js got there) is left out: only what it read matters here.
  process.stdout.write(JSON.stringify(cite.data.map(({ _graph, ...item }) => item)))
} catch (error) {
  console.error(`${file}: ${error.message}`)
  process.exit(1)
}
