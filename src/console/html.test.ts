import { describe, expect, it } from 'vitest';
import { html, raw } from './html.js';

describe('html templates', () => {
  it('escape every interpolated value, in text and in attributes', () => {
    const evil = `<script>alert("x")</script>' onload='x`;
    expect(html`<p title="${evil}">${evil}</p>`.text).toBe(
      '<p title="&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&#39; onload=&#39;x">' +
        '&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&#39; onload=&#39;x</p>',
    );
  });

  it('keep nested templates and raw markup, join arrays, drop null, undefined and false', () => {
    const items = ['a&b', 'c'];
    expect(
      html`<ul>
        ${items.map((i) => html`<li>${i}</li>`)}
      </ul>`.text.replace(/\s+/g, ''), // prettier lays `html` templates out as HTML
    ).toBe('<ul><li>a&amp;b</li><li>c</li></ul>');
    expect(html`${raw('<br>')}${null}${undefined}${false}${0}`.text).toBe('<br>0');
  });
});
